"""Distributed checkpoints (torch.distributed.checkpoint) with an atomic completion protocol,
on a local disk or an object store (s3://...), through one code path (fsspec: DCP's
FsspecWriter / FsspecReader and robodata.storage.objects).

    checkpoints/step-00000040.tmp/   local disk: DCP shards being written (never picked for resume)
    checkpoints/step-00000040/       complete: .metadata, __<rank>_<i>.distcp, meta.json, COMPLETE

Save (collective): every rank writes its shards into the staging folder; each rank CRC32s its
own files (as stored: on S3 it reads them back); rank 0 writes meta.json, then COMPLETE (file
sizes + CRCs) last, durably, and publishes the folder (`objects.staging_folder` /
`publish_folder`: a local disk renames `.tmp` into place; an object store cannot rename a folder,
so shards go straight to `step-N/` and the COMPLETE object, written last, publishes it).
Resume picks the newest folder with a COMPLETE marker whose files all match it (checked by all
ranks, each a slice of the files); a partial or corrupted one is skipped with a warning.
Deleting a checkpoint (pruning, replacing) removes its COMPLETE marker first.
"""

from __future__ import annotations

import json
import logging
import re
import time
import zlib
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter

from robodata.errors import RobodataError
from robodata.storage import objects

log = logging.getLogger("robodata.train")

STEP_RE = re.compile(r"^step-(\d{8})$")
PARTIAL_RE = re.compile(r"^step-(\d{8})(\.tmp)?$")
COMPLETE = "COMPLETE"
META = "meta.json"


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


Options = dict[str, Any] | None


def _join(root: str | Path, name: str) -> str:
    return f"{str(root).rstrip('/')}/{name}"


def _name(uri: str | Path) -> str:
    return str(uri).rstrip("/").rsplit("/", 1)[-1]


def crc32_file(path: str | Path, bufsize: int = 1 << 20, options: Options = None) -> int:
    crc = 0
    with objects.filesystem(str(path), options).open(str(path), "rb") as f:
        while chunk := f.read(bufsize):
            crc = zlib.crc32(chunk, crc)
    return crc


def _step_dirs(root: str | Path, options: Options) -> tuple[dict[str, str], set[str]]:
    """({name: uri} of the step-* folders under root, names holding a COMPLETE marker); one listing."""
    root = str(root)
    fs = objects.filesystem(root, options)
    base = fs._strip_protocol(root).rstrip("/")
    try:
        found = fs.find(base, maxdepth=2, withdirs=True, detail=True)
    except FileNotFoundError:
        return {}, set()
    dirs: dict[str, str] = {}
    marked: set[str] = set()
    for path, info in found.items():
        rel = path[len(base) + 1 :].split("/")
        if not PARTIAL_RE.match(rel[0]):
            continue
        dirs.setdefault(rel[0], _join(root, rel[0]))  # on S3 a folder exists through its objects
        if len(rel) == 2 and rel[1] == COMPLETE and info.get("type") == "file":
            marked.add(rel[0])
    return dirs, marked


def complete_checkpoints(root: str | Path, options: Options = None) -> list[str]:
    """Checkpoint folders under root that carry a COMPLETE marker, newest step first (no content check)."""
    dirs, marked = _step_dirs(root, options)
    steps = {name: int(m.group(1)) for name in marked if (m := STEP_RE.match(name))}
    return [dirs[n] for n in sorted(steps, key=steps.__getitem__, reverse=True)]


def partial_checkpoints(root: str | Path, options: Options = None) -> list[str]:
    """Step folders under root that were never completed (no COMPLETE, or a local `.tmp`)."""
    dirs, marked = _step_dirs(root, options)
    return sorted(uri for name, uri in dirs.items() if not (STEP_RE.match(name) and name in marked))


def read_marker(path: str | Path, options: Options = None) -> dict[str, Any]:
    return json.loads(objects.read_bytes(_join(path, COMPLETE), options))


def checkpoint_problem(
    path: str | Path, files: list[str] | None = None, verify_crc: bool = True, options: Options = None
) -> str | None:
    """Why checkpoint `path` is unusable, or None. `files`: only check these entries of COMPLETE."""
    try:
        expected: dict[str, list[int]] = read_marker(path, options)["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable {COMPLETE} marker ({exc})"
    if ".metadata" not in expected or META not in expected:
        return f"{COMPLETE} marker does not list .metadata and {META}"
    for name in files if files is not None else sorted(expected):
        size, crc = expected[name]
        f = _join(path, name)
        try:
            got = objects.size(f, options)
        except FileNotFoundError:
            return f"missing file {name}"
        if got != size:
            return f"{name}: {got} bytes, expected {size}"
        if verify_crc and crc32_file(f, options=options) != crc:
            return f"{name}: CRC32 mismatch"
    return None


def _files(folder: str, options: Options, rank: int | None = None) -> dict[str, int]:
    """{name: size} of the files in `folder` (only rank's own shards `__<rank>_*` when given)."""
    fs = objects.filesystem(folder, options)
    base = fs._strip_protocol(folder).rstrip("/")
    out = {}
    for path, info in fs.find(base, maxdepth=1, detail=True).items():
        name = path[len(base) + 1 :]
        if info.get("type") == "file" and (rank is None or name.startswith(f"__{rank}_")):
            out[name] = int(info["size"])
    return out


class CheckpointManager:
    """Collective save/resume of one run's checkpoints under `root` (a folder or s3://...,
    reached with the fsspec `options`). All ranks call every method."""

    def __init__(
        self,
        root: str | Path,
        keep: int,
        verify: bool,
        rank: int,
        world_size: int,
        device: torch.device,
        options: Options = None,
    ):
        self.root, self.keep, self.verify = str(root).rstrip("/"), keep, verify
        self.options = dict(options or {})
        self.rank, self.world_size, self.device = rank, world_size, device
        self._barrier()

    def _barrier(self) -> None:
        if dist.is_initialized():
            dist.barrier()

    def _broadcast(self, obj: Any) -> Any:
        if not dist.is_initialized():
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _gather(self, obj: Any) -> list[Any]:
        if not dist.is_initialized():
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def path(self, step: int) -> str:
        return _join(self.root, step_dir_name(step))

    # ---------------------------------------------------------------- save
    def save(self, step: int, state: dict[str, Any], meta: dict[str, Any]) -> str:
        final = self.path(step)
        staging = objects.staging_folder(final)
        if self.rank == 0:  # a leftover of an earlier attempt at this step (on S3: maybe `final` itself)
            objects.remove_folder(staging, self.options, first=[COMPLETE])
        self._barrier()
        opts = objects.fsspec_kwargs(staging, self.options)
        dcp.save(state, storage_writer=FsspecWriter(staging, **opts))
        mine = {
            name: [size, crc32_file(_join(staging, name), options=self.options)]
            for name, size in sorted(_files(staging, self.options, self.rank).items())
        }
        files: dict[str, list[int]] = {}
        for part in self._gather(mine):
            files.update(part)
        if self.rank == 0:
            meta_text = json.dumps(meta, indent=1, sort_keys=True, default=str).encode()
            objects.write_durable(_join(staging, META), meta_text, self.options)
            for name, size in sorted(_files(staging, self.options).items()):
                if name not in files and name != COMPLETE:
                    files[name] = [size, crc32_file(_join(staging, name), options=self.options)]
            marker = json.dumps({"step": step, "time": time.time(), "files": files}).encode()
            objects.write_durable(_join(staging, COMPLETE), marker, self.options)  # last: publishes on S3
            objects.publish_folder(staging, final, self.options)  # local: rename into place
            self._prune(keep_step=step)
        self._barrier()
        return final

    def _prune(self, keep_step: int) -> None:
        for old in complete_checkpoints(self.root, self.options)[self.keep :]:
            objects.remove_folder(old, self.options, first=[COMPLETE])
        for stale in partial_checkpoints(self.root, self.options):  # no save is in flight now
            if _name(stale) != step_dir_name(keep_step):
                objects.remove_folder(stale, self.options)

    # ---------------------------------------------------------------- resume
    def latest(self) -> str | None:
        """Newest checkpoint that is complete and intact on every rank's check; None if none."""
        candidates = self._broadcast(complete_checkpoints(self.root, self.options) if self.rank == 0 else None)
        if self.rank == 0:
            for partial in partial_checkpoints(self.root, self.options):
                log.warning("skipping partially written checkpoint %s (no %s marker)", partial, COMPLETE)
        for path in candidates:
            try:
                names = sorted(read_marker(path, self.options)["files"])
            except (OSError, ValueError, KeyError, TypeError):
                names = []
            problem = (
                checkpoint_problem(path, names[self.rank :: self.world_size], self.verify, self.options)
                if names
                else f"unreadable {COMPLETE} marker"
            )
            problems = [p for p in self._gather(problem) if p]
            if not problems:
                return path
            if self.rank == 0:
                log.warning("skipping corrupted checkpoint %s: %s", path, "; ".join(problems))
        return None

    def load(self, path: str | Path, state: dict[str, Any]) -> None:
        """Fill `state` in place from checkpoint `path` (resharding to this world size)."""
        try:
            dcp.load(state, storage_reader=_reader(path, self.options))
        except Exception as exc:  # DCP wraps per-rank failures in CheckpointException
            raise RobodataError(f"cannot load checkpoint {path}: {exc}") from exc


def _reader(path: str | Path, options: Options) -> FsspecReader:
    return FsspecReader(str(path), **objects.fsspec_kwargs(str(path), options))


def checkpoint_keys(path: str | Path, options: Options = None) -> set[str]:
    """Flattened state keys stored in a DCP checkpoint."""
    return set(_reader(path, options).read_metadata().state_dict_metadata)


def load_full_tensors(path: str | Path, prefix: str = "model.", options: Options = None) -> dict[str, torch.Tensor]:
    """Unsharded tensors under `prefix` from a DCP checkpoint, in one process (no process group)."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    md = _reader(path, options).read_metadata().state_dict_metadata
    out = {
        k: torch.empty(m.size, dtype=m.properties.dtype)
        for k, m in md.items()
        if k.startswith(prefix) and isinstance(m, TensorStorageMetadata)
    }
    if not out:
        raise RobodataError(f"checkpoint {path} holds no tensors under {prefix!r}")
    dcp.load(out, storage_reader=_reader(path, options), no_dist=True)
    return {k[len(prefix) :]: v for k, v in out.items()}
