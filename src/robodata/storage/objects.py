"""Files and objects under a local folder or s3:// with one code path (fsspec / s3fs).

Everything takes a URI (absolute path, file://..., s3://bucket/key) and the fsspec options of
its StorageLocation (`loc.fsspec_options()`; {} for local paths). Code that needs a real local
file (importers, the container writer) goes through `local_input` / `local_output`: for a local
URI they hand back the path itself; for an object store they stage one copy in the scratch
directory (`ROBODATA_SCRATCH`, default the system temp dir), checked against its free space
up front and removed on exit, so scratch use is bounded by the items in flight.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import fsspec

from robodata.errors import RobodataError

_SCRATCH_HEADROOM = 64 * 2**20  # keep this much free on the scratch disk beyond a staged item


def is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


def local_path(uri: str) -> str:
    return uri.removeprefix("file://")


def fsspec_kwargs(uri: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The keyword options `filesystem` opens `uri` with, for libraries that build their own
    fsspec filesystem from a URL (torch DCP's FsspecWriter/Reader, pyarrow)."""
    if not is_remote(uri):
        return {"auto_mkdir": True}
    return {**(options or {}), "use_listings_cache": False}


def filesystem(uri: str, options: dict[str, Any] | None = None) -> fsspec.AbstractFileSystem:
    """The fsspec filesystem for `uri` (local: creates parent folders on write). Remote listings
    are never cached: other processes write the same prefixes."""
    if not is_remote(uri):
        return fsspec.filesystem("file", **fsspec_kwargs(uri))
    return fsspec.core.url_to_fs(uri, **fsspec_kwargs(uri, options))[0]


def write_bytes(uri: str, data: bytes, options: dict[str, Any] | None = None) -> None:
    """Write atomically: readers see the old object or the whole new one, never a part."""
    fs = filesystem(uri, options)
    tmp = uri + ".partial"
    fs.pipe_file(tmp, data)
    fs.mv(tmp, uri)


def create(uri: str, data: bytes, options: dict[str, Any] | None = None) -> bool:
    """Create `uri` holding `data` unless it exists (never overwrites, also under a race): True
    when this call created it, False when the object was already there (nothing written).
    Local: a fsynced temporary file hard-linked into place, with the mode a plain `open` gives
    (the umask's, not mkstemp's 0600); S3: a conditional PUT (If-None-Match)."""
    if is_remote(uri):
        try:
            filesystem(uri, options).pipe_file(uri, data, mode="create")
        except FileExistsError:
            return False
        return True
    path = local_path(uri)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.link(tmp, path)  # fails if `path` exists: atomic create-if-absent
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def _umask() -> int:
    """The process's umask, read without setting it (Linux: /proc; elsewhere set and restored)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_durable(uri: str, data: bytes, options: dict[str, Any] | None = None) -> None:
    """Write `data` and return only once it is durable (local: fsynced; S3: a PUT is). Not atomic
    on a local disk: write inside a folder that is published afterwards (`publish_folder`)."""
    if is_remote(uri):
        filesystem(uri, options).pipe_file(uri, data)
        return
    path = local_path(uri)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def staging_folder(final: str) -> str:
    """Where to write a folder that becomes visible as `final`. A local disk renames folders
    atomically: a sibling `<final>.tmp`, renamed by `publish_folder`. An object store cannot
    rename a folder (a copy, object by object): `final` itself, and the writer's completion
    marker, written last, is what publishes it (readers ignore a folder without one)."""
    return final if is_remote(final) else final.rstrip("/") + ".tmp"


def publish_folder(staging: str, final: str, options: dict[str, Any] | None = None) -> None:
    """Make the folder written at `staging_folder(final)` visible as `final` (replacing an older
    `final`), durably. Nothing to do on an object store (the marker published it)."""
    if staging == final:
        return
    src, dst = local_path(staging), local_path(final)
    fsync_path(src)
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.replace(src, dst)
    fsync_path(os.path.dirname(dst))


def remove_folder(uri: str, options: dict[str, Any] | None = None, first: Iterable[str] = ()) -> None:
    """Delete the folder `uri`; the files `first` (e.g. a completion marker) are removed before
    the rest, so a half-deleted folder never looks complete. Missing is fine."""
    fs = filesystem(uri, options)
    base = uri.rstrip("/")
    for name in first:
        with suppress(FileNotFoundError):
            fs.rm_file(f"{base}/{name}")
    with suppress(FileNotFoundError):
        fs.rm(base, recursive=True)


def move(src: str, dst: str, options: dict[str, Any] | None = None) -> None:
    """`src` becomes `dst` (replacing it), durably: a rename on a local disk (the folder fsynced),
    a server-side copy then delete on an object store (no byte passes through this process).
    FileNotFoundError when `src` does not exist."""
    if not is_remote(src):
        a, b = local_path(src), local_path(dst)
        os.makedirs(os.path.dirname(b) or ".", exist_ok=True)
        os.replace(a, b)
        fsync_path(os.path.dirname(b) or ".")
        return
    filesystem(src, options).mv(src, dst)


def fsync_path(path: str) -> None:
    """The file (or folder) at `path` made durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_bytes(uri: str, options: dict[str, Any] | None = None) -> bytes:
    """The object's bytes; FileNotFoundError when it does not exist."""
    return filesystem(uri, options).cat_file(uri)


def exists(uri: str, options: dict[str, Any] | None = None) -> bool:
    return filesystem(uri, options).exists(uri)


def size(uri: str, options: dict[str, Any] | None = None) -> int:
    fs = filesystem(uri, options)
    fs.invalidate_cache(uri)
    return int(fs.size(uri))


def upload(local: str, uri: str, options: dict[str, Any] | None = None) -> int:
    """Copy a local file to `uri` (multipart for big files on S3) and verify the stored size."""
    want = os.path.getsize(local)
    fs = filesystem(uri, options)
    if is_remote(uri):
        fs.put_file(local, uri)  # an S3 PUT / multipart completion is atomic
    else:
        tmp = local_path(uri) + ".partial"
        fs.put_file(local, tmp)
        fs.mv(tmp, local_path(uri))
    got = size(uri, options)
    if got != want:
        fs.rm(uri)
        raise RobodataError(f"upload of {local} to {uri}: stored {got} bytes, expected {want}; removed it")
    return got


def scratch_dir() -> str:
    d = os.environ.get("ROBODATA_SCRATCH") or tempfile.gettempdir()
    os.makedirs(d, exist_ok=True)
    return d


def _need_space(where: str, nbytes: int, what: str) -> None:
    free = shutil.disk_usage(where).free
    if nbytes + _SCRATCH_HEADROOM > free:
        raise RobodataError(
            f"scratch {where}: {free} bytes free, staging {what} needs {nbytes} "
            "(set ROBODATA_SCRATCH to a bigger volume)"
        )


def _listing(fs, uri: str, only: Iterable[str]) -> dict[str, dict]:
    """{path relative to the folder `uri`: info} of the files under each of `only` ("" = all)."""
    base = fs._strip_protocol(uri).rstrip("/")
    out: dict[str, dict] = {}
    for rel in only:
        for path, info in fs.find(f"{base}/{rel}".rstrip("/"), detail=True).items():
            if info.get("type") == "file":
                out[path[len(base) + 1 :]] = info
    return out


def mtime(info: dict) -> float | None:
    """An fsspec listing entry's modification time (s since the epoch; S3: LastModified), or None."""
    v = info.get("LastModified") or info.get("mtime")
    if v is None:
        return None
    return v.timestamp() if hasattr(v, "timestamp") else float(v)


def fetch_into(uri: str, only: Iterable[str], dest: str, options: dict[str, Any] | None = None) -> None:
    """Copy the files or folders `only` (relative to the folder `uri`) into the local folder `dest`,
    keeping relative paths and modification times. A local `uri` needs no copy: nothing happens."""
    only = list(only)
    if not is_remote(uri) or not only:
        return
    fs = filesystem(uri, options)
    files = _listing(fs, uri, only)
    if not files:
        raise FileNotFoundError(f"{uri}: nothing under {sorted(only)}")
    _need_space(dest, sum(int(i.get("size") or 0) for i in files.values()), uri)
    base = uri.rstrip("/")
    lpaths = [os.path.join(dest, rel) for rel in files]
    for lp in lpaths:
        os.makedirs(os.path.dirname(lp), exist_ok=True)
    fs.get([f"{base}/{rel}" for rel in files], lpaths)  # concurrent requests on S3
    for lp, info in zip(lpaths, files.values(), strict=True):
        mt = mtime(info)
        if mt is not None:
            os.utime(lp, (mt, mt))


@contextmanager
def local_input(uri: str, options: dict[str, Any] | None = None, only: Iterable[str] | None = None) -> Iterator[str]:
    """A local path holding the file or folder at `uri` under the same base name (modification
    times kept). `only`: stage just these files / subfolders of a folder `uri`."""
    if not is_remote(uri):
        yield local_path(uri)
        return
    stage = tempfile.mkdtemp(prefix="robodata-in-", dir=scratch_dir())
    try:
        dest = os.path.join(stage, uri.rstrip("/").rsplit("/", 1)[-1])
        fs = filesystem(uri, options)
        if only is None and not fs.isdir(uri):
            info = fs.info(uri)  # FileNotFoundError when missing
            _need_space(stage, int(info.get("size") or 0), uri)
            fs.get_file(uri, dest)
            mt = mtime(info)
            if mt is not None:
                os.utime(dest, (mt, mt))
        else:
            os.makedirs(dest)
            fetch_into(uri, [""] if only is None else only, dest, options)
        yield dest
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextmanager
def local_output(uri: str, options: dict[str, Any] | None = None) -> Iterator[str]:
    """A local path to write `uri`'s content to. Local URIs: the path itself (the writer publishes
    it). Remote: a scratch file uploaded (size-verified) when the block succeeds; on an exception
    nothing is uploaded. The scratch copy is removed either way."""
    if not is_remote(uri):
        yield local_path(uri)
        return
    stage = tempfile.mkdtemp(prefix="robodata-out-", dir=scratch_dir())
    try:
        local = os.path.join(stage, uri.rstrip("/").rsplit("/", 1)[-1])
        yield local
        if not os.path.isfile(local):
            raise RobodataError(f"{uri}: nothing was written to the staged file {local}")
        upload(local, uri, options)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
