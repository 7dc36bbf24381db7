"""Hostile recordings for the newer importers (issue 43), each a landing entry built from a tiny
synthetic episode written by the format's own library, then damaged one way:

silent_fill   data the library would fill silently (a Zarr chunk deleted: zarr returns the fill value)
concealed     a frame a decoder would conceal (a JPEG cut short, its end marker kept or not)
outside_root  a file read through a link out of the item (symlinks, HDF5 external links, external
              storage, virtual datasets)
lie           a declared value the bytes contradict (compress_len, episode_ends, a JPEG segment length)
unbounded     a small input declaring huge work (sparse datasets, a JPEG header of 60000x60000)

Every case names the phrase its quarantine reason must hold. `cases(root)` writes them all under
`root/<format>/` (`root/outside/` holds what the links point at) and returns them.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from robodata.ingest.synth.episode import SynthConfig, jpeg_bytes, make_episode

TINY = dict(duration_s=0.8, height=48, width=64, fps=10.0, state_hz=50.0, cameras=("cam_left", "wrist"))
CLASSES = ("silent_fill", "concealed", "outside_root", "lie", "unbounded")
EOI = b"\xff\xd9"


@dataclass(frozen=True)
class Case:
    name: str  # the landing entry (file or folder) under root/<fmt>/
    fmt: str  # hdf5 | zarr | rlds | ros1 | ros2
    cls: str  # one of CLASSES
    expect: str  # a phrase the quarantine reason holds (alternatives separated by "|")
    item: str = ""  # of an entry holding several episodes, the one judged (its uri's ending)

    def explained(self, reason: str) -> bool:
        return any(p in reason for p in self.expect.split("|"))


# --- JPEG damage ------------------------------------------------------------------------------


def _scan_start(d: bytes) -> int:
    pos = 2
    while d[pos + 1] != 0xDA:
        pos += 2 + struct.unpack(">H", d[pos + 2 : pos + 4])[0]
    return pos + 2 + struct.unpack(">H", d[pos + 2 : pos + 4])[0]


def cut(frac: float, keep_end: bool = True) -> Callable[[bytes], bytes]:
    """The JPEG cut inside its scan at `frac` of the entropy-coded data (its end marker put back)."""

    def damage(d: bytes) -> bytes:
        s = _scan_start(d)
        return d[: s + int((len(d) - 2 - s) * frac)] + (EOI if keep_end else b"")

    return damage


def sof(h: int, w: int) -> Callable[[bytes], bytes]:
    """The frame header rewritten to declare h x w (the scan stays the small one)."""

    def damage(d: bytes) -> bytes:
        i = next(i for i in range(2, len(d) - 1) if d[i] == 0xFF and d[i + 1] in (0xC0, 0xC1, 0xC2))
        return d[: i + 5] + struct.pack(">HH", h, w) + d[i + 9 :]

    return damage


def dqt_length(d: bytes) -> bytes:
    """The first quantization table's segment declares 65535 bytes."""
    i = d.index(b"\xff\xdb")
    return d[: i + 2] + b"\xff\xff" + d[i + 4 :]


# (suffix, damage, class, expected phrase): applied to one frame of one camera
JPEG_DAMAGE: tuple[tuple[str, Callable[[bytes], bytes], str, str], ...] = (
    *((f"cut{int(f * 100)}", cut(f), "concealed", "corrupt JPEG") for f in (0.2, 0.35, 0.5, 0.65, 0.8)),
    ("cut50_noend", cut(0.5, keep_end=False), "concealed", "no JPEG end marker|does not end there"),
    ("dqt_length", dqt_length, "lie", "broken JPEG"),
    ("sof_60000", sof(60000, 60000), "unbounded", "over 16384 a side"),
    ("sof_12000", sof(12000, 16000), "unbounded", "corrupt JPEG|work bound"),
)


def jpeg_variants(keep: Callable[[str], bool]) -> Iterator[tuple[str, int, Callable[[bytes], bytes], str, str]]:
    """(case name, frame, damage, class, expected phrase) of each JPEG damage to frame 0 (read while
    the item is opened) and frame 3 (read on the way to the encoder) that `keep` keeps."""
    for frame in (0, 3):
        for suffix, damage, cls, expect in JPEG_DAMAGE:
            if keep(name := f"jpeg_{suffix}_f{frame}"):
                yield name, frame, damage, cls, expect


@contextmanager
def damaged_jpegs(module, frame: int, damage: Callable[[bytes], bytes]) -> Iterator[None]:
    """`module.jpeg_bytes` damaging the `frame`-th image it encodes."""
    calls = [0]

    def enc(rgb, quality=90):
        b = jpeg_bytes(rgb, quality)
        calls[0] += 1
        return damage(b) if calls[0] - 1 == frame else b

    with mock.patch.object(module, "jpeg_bytes", enc):
        yield


def episode(seed: int = 0):
    return make_episode(SynthConfig(episodes=1, seed=seed, format="jpeg", **TINY), 0)  # type: ignore[arg-type]


def link_out(path: Path, outside: Path) -> None:
    """`path` moved under `outside` (a copy that reads as valid data) and replaced by a link to it."""
    outside.mkdir(parents=True, exist_ok=True)
    target = outside / f"{path.parent.name}-{path.name}-{len(list(outside.iterdir()))}"
    shutil.move(str(path), target)
    os.symlink(target, path)


# --- HDF5 -------------------------------------------------------------------------------------


def _aloha(d: Path, name: str, compress: bool = True) -> Path:
    from robodata.ingest.synth import arrays

    tmp = d / f".{name}"
    tmp.mkdir(parents=True, exist_ok=True)
    p = arrays.write_aloha(episode(), tmp, compress=compress, index=0)
    out = d / f"{name}_episode_0.hdf5"  # the ALOHA key map goes by `episode_N`
    p.rename(out)
    tmp.rmdir()
    return out


def everything(name: str) -> bool:
    return True


def hdf5_cases(root: Path, outside: Path, keep: Callable[[str], bool] = everything) -> list[Case]:
    import h5py

    from robodata.ingest.synth import arrays

    d = root / "hdf5"
    d.mkdir(parents=True, exist_ok=True)
    outside.mkdir(parents=True, exist_ok=True)
    out: list[Case] = []
    for name, frame, damage, cls, expect in jpeg_variants(keep):
        with damaged_jpegs(arrays, frame, damage):
            p = _aloha(d, name)
        out.append(Case(p.name, "hdf5", cls, expect))

    def edit(name: str, cls: str, expect: str, fn: Callable, compress: bool = True) -> None:
        if not keep(name):
            return
        p = _aloha(d, name, compress)
        with h5py.File(p, "r+") as f:
            fn(f, p)
        out.append(Case(p.name, "hdf5", cls, expect))

    def set_len(value):
        def fn(f, p):
            lens = np.asarray(f["compress_len"][()], np.float64)
            lens[0, 2] = value(lens[0, 2])
            del f["compress_len"]
            f["compress_len"] = lens

        return fn

    for label, value in (
        ("negative", lambda v: -v),
        ("zero", lambda v: 0),
        ("huge", lambda v: 1e12),
        ("past_row", lambda v: 10**6),
        ("fraction", lambda v: v - 0.5),
        ("nan", lambda v: float("nan")),
        ("short", lambda v: v - 10),
        ("long", lambda v: v + 1),
    ):
        edit(f"compress_len_{label}", "lie", "compress_len", set_len(value))

    def fewer_rows(f, p):
        lens = np.asarray(f["compress_len"][()])
        del f["compress_len"]
        f["compress_len"] = lens[:1]

    edit("compress_len_rows", "lie", "compress_len", fewer_rows)

    def external_link(key: str):
        def fn(f, p):
            ext = outside / f"{p.stem}-ext.h5"
            with h5py.File(ext, "w") as e:
                e.create_dataset("x", data=f[key][()])
            del f[key]
            f[key] = h5py.ExternalLink(str(ext), "/x")

        return fn

    edit("extlink_camera", "outside_root", "external link", external_link("observations/images/wrist"))
    edit("extlink_compress_len", "outside_root", "external link", external_link("compress_len"))
    edit("extlink_qpos", "outside_root", "external link", external_link("observations/qpos"), compress=False)

    def external_storage(f, p):
        v = np.asarray(f["observations/qpos"][()])
        raw = outside / f"{p.stem}.bin"
        raw.write_bytes(v.tobytes())
        del f["observations/qpos"]
        f.create_dataset("observations/qpos", shape=v.shape, dtype=v.dtype, external=[(str(raw), 0, v.nbytes)])

    edit("external_storage", "outside_root", "external files", external_storage, compress=False)

    def virtual(f, p):
        v = np.asarray(f["action"][()])
        src = outside / f"{p.stem}-vds.h5"
        with h5py.File(src, "w") as e:
            e["a"] = v
        lay = h5py.VirtualLayout(shape=v.shape, dtype=v.dtype)
        lay[:] = h5py.VirtualSource(str(src), "a", shape=v.shape)
        del f["action"]
        f.create_virtual_dataset("action", lay)

    edit("virtual_dataset", "outside_root", "virtual dataset", virtual, compress=False)

    def sparse(shape: tuple, key: str = "observations/images/wrist", dtype="u1"):
        def fn(f, p):
            del f[key]
            f.create_dataset(key, shape=shape, dtype=dtype, chunks=(1, *shape[1:]))

        return fn

    edit("sparse_frames", "unbounded", "work bound", sparse((100_000, 48, 64, 3)), compress=False)
    edit("sparse_4k", "unbounded", "work bound", sparse((8, 4096, 4096, 3)), compress=False)
    edit("sparse_state", "unbounded", "work bound", sparse((8, 10**9), "observations/qpos", "f8"), compress=False)

    if keep("extlink_demo"):  # robomimic: one episode group an external link (the others stay good)
        from robodata.ingest.synth.arrays import write_robomimic

        p = write_robomimic([episode(), episode(1)], d, name="extlink_demo")
        ext = outside / "extlink_demo-ext.h5"
        with h5py.File(p, "r+") as f, h5py.File(ext, "w") as e:
            f.copy(f["data/demo_1"], e, "demo")
            del f["data/demo_1"]
            f["data/demo_1"] = h5py.ExternalLink(str(ext), "/demo")
        out.append(Case(p.name, "hdf5", "outside_root", "external link", item="#data/demo_1"))
    if keep("linked_file"):
        link = d / "linked_file_episode_0.hdf5"
        os.symlink(_aloha(outside, "linked_target"), link)
        out.append(Case(link.name, "hdf5", "outside_root", "outside"))
    return out


# --- Zarr -------------------------------------------------------------------------------------


def zarr_cases(root: Path, outside: Path, keep: Callable[[str], bool] = everything) -> list[Case]:
    import zarr

    from robodata.ingest.synth.arrays import write_zarr

    d = root / "zarr"
    d.mkdir(parents=True, exist_ok=True)
    out: list[Case] = []

    def store(name: str) -> Path:
        return write_zarr([episode()], d, name=name)

    for key, step, label in (("wrist_rgb", 0, "first"), ("wrist_rgb", 4, "middle"), ("cam_left_rgb", 7, "last")):
        if not keep(f"missing_{key}_{label}"):
            continue
        p = store(f"missing_{key}_{label}")
        (p / "data" / key / f"{step}.0.0.0").unlink()
        out.append(Case(p.name, "zarr", "silent_fill", f"data/{key} chunk {step}.0.0.0 is missing"))
    for key in ("state", "action"):
        if not keep(f"missing_{key}"):
            continue
        p = store(f"missing_{key}")
        (p / "data" / key / "0.0").unlink()
        out.append(Case(p.name, "zarr", "silent_fill", f"data/{key} chunk 0.0 is missing"))
    if keep("missing_episode_ends"):
        p = store("missing_episode_ends")
        (p / "meta" / "episode_ends" / "0").unlink()
        out.append(Case(p.name, "zarr", "silent_fill", "meta/episode_ends chunk 0 is missing"))

    for rel, label in (
        ("data/wrist_rgb", "camera_dir"),
        ("data/state", "state_dir"),
        ("data/wrist_rgb/2.0.0.0", "chunk"),
        ("data/state/0.0", "state_chunk"),
        ("data/wrist_rgb/.zarray", "zarray"),
        ("meta", "meta_dir"),
        ("data", "data_dir"),
        (".zattrs", "root_attrs"),
    ):
        if not keep(f"link_{label}"):
            continue
        p = store(f"link_{label}")
        link_out(p / rel, outside)
        out.append(Case(p.name, "zarr", "outside_root", "outside"))

    def ends(name: str, values, expect: str, cls: str = "lie") -> None:
        if not keep(name):
            return
        p = store(name)
        g = zarr.open_group(str(p), mode="r+", zarr_format=2)
        g["meta"].create_array(  # type: ignore[union-attr]
            "episode_ends", data=np.asarray(values), overwrite=True, config={"write_empty_chunks": True}
        )
        out.append(Case(p.name, "zarr", cls, expect))

    probe: Any = zarr.open_group(str(store("probe")), mode="r")
    n = int(np.asarray(probe["meta/episode_ends"][:])[-1])
    shutil.rmtree(d / "probe.zarr")
    ends("ends_float", [float(n)], "expected integer")
    ends("ends_fraction", [n - 0.5], "expected integer")
    ends("ends_negative", [-3], "non-decreasing")
    ends("ends_decreasing", [n, 2], "non-decreasing")
    ends("ends_past_data", [n + 5], f"needs {n + 5}")
    ends("ends_huge", [10**12], "needs")

    def zarray(name: str, key: str, change: Callable[[dict], None], cls: str, expect: str) -> None:
        if not keep(name):
            return
        p = store(name)
        meta = p / "data" / key / ".zarray"
        doc = json.loads(meta.read_text())
        change(doc)
        meta.write_text(json.dumps(doc))
        out.append(Case(p.name, "zarr", cls, expect))

    def big_frames(doc: dict) -> None:
        doc["shape"][1:3] = [16000, 16000]
        doc["chunks"][1:3] = [16000, 16000]

    zarray("declared_16000", "wrist_rgb", big_frames, "unbounded", "work bound")

    def wide_state(doc: dict) -> None:
        doc["shape"][1] = doc["chunks"][1] = 10**8

    zarray("declared_wide_state", "state", wide_state, "unbounded", "work bound")
    return out
