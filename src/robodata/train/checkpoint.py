"""Distributed checkpoints (torch.distributed.checkpoint) with an atomic completion protocol.

    checkpoints/step-00000040.tmp/   DCP shards being written (never picked for resume)
    checkpoints/step-00000040/       complete: .metadata, __<rank>_<i>.distcp, meta.json, COMPLETE

Save (collective): every rank writes its shards into the .tmp dir; each rank CRC32s its own
files; rank 0 writes meta.json, then COMPLETE (file sizes + CRCs) last, fsyncs, and renames
the dir. Resume picks the newest dir with a COMPLETE marker whose files all match it (checked
by all ranks, each a slice of the files); a partial or corrupted one is skipped with a warning.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import zlib
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from robodata.errors import RobodataError

log = logging.getLogger("robodata.train")

STEP_RE = re.compile(r"^step-(\d{8})$")
COMPLETE = "COMPLETE"
META = "meta.json"


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def crc32_file(path: Path, bufsize: int = 1 << 20) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            crc = zlib.crc32(chunk, crc)
    return crc


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def complete_checkpoints(root: str | Path) -> list[Path]:
    """Checkpoint dirs under root that carry a COMPLETE marker, newest step first (no content check)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and STEP_RE.match(p.name) and (p / COMPLETE).is_file()]
    return sorted(found, key=lambda p: int(STEP_RE.match(p.name).group(1)), reverse=True)


def checkpoint_problem(path: Path, files: list[str] | None = None, verify_crc: bool = True) -> str | None:
    """Why checkpoint `path` is unusable, or None. `files`: only check these entries of COMPLETE."""
    try:
        marker = json.loads((path / COMPLETE).read_text())
        expected: dict[str, list[int]] = marker["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable {COMPLETE} marker ({exc})"
    if ".metadata" not in expected or META not in expected:
        return f"{COMPLETE} marker does not list .metadata and {META}"
    for name in (files if files is not None else sorted(expected)):
        size, crc = expected[name]
        f = path / name
        if not f.is_file():
            return f"missing file {name}"
        if f.stat().st_size != size:
            return f"{name}: {f.stat().st_size} bytes, expected {size}"
        if verify_crc and crc32_file(f) != crc:
            return f"{name}: CRC32 mismatch"
    return None


class CheckpointManager:
    """Collective save/resume of one run's checkpoints. All ranks call every method."""

    def __init__(self, root: Path, keep: int, verify: bool, rank: int, world_size: int, device: torch.device):
        self.root, self.keep, self.verify = Path(root), keep, verify
        self.rank, self.world_size, self.device = rank, world_size, device
        if rank == 0:
            self.root.mkdir(parents=True, exist_ok=True)
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

    # ---------------------------------------------------------------- save
    def save(self, step: int, state: dict[str, Any], meta: dict[str, Any]) -> Path:
        final = self.root / step_dir_name(step)
        tmp = final.with_name(final.name + ".tmp")
        if self.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self._barrier()
        dcp.save(state, checkpoint_id=str(tmp))
        mine = {p.name: [p.stat().st_size, crc32_file(p)] for p in sorted(tmp.glob(f"__{self.rank}_*"))}
        files: dict[str, list[int]] = {}
        for part in self._gather(mine):
            files.update(part)
        if self.rank == 0:
            _write_durable(tmp / META, json.dumps(meta, indent=1, sort_keys=True, default=str))
            for p in sorted(tmp.iterdir()):
                if p.name not in files and p.name != COMPLETE:
                    files[p.name] = [p.stat().st_size, crc32_file(p)]
            _write_durable(tmp / COMPLETE, json.dumps({"step": step, "time": time.time(), "files": files}))
            _fsync_dir(tmp)
            if final.exists():  # an earlier attempt finished this step; replace it
                shutil.rmtree(final)
            os.replace(tmp, final)
            _fsync_dir(self.root)
            self._prune()
        self._barrier()
        return final

    def _prune(self) -> None:
        for old in complete_checkpoints(self.root)[self.keep:]:
            shutil.rmtree(old, ignore_errors=True)
        for stale in self.root.glob("step-*.tmp"):
            shutil.rmtree(stale, ignore_errors=True)

    # ---------------------------------------------------------------- resume
    def latest(self) -> Path | None:
        """Newest checkpoint that is complete and intact on every rank's check; None if none."""
        candidates = self._broadcast([str(p) for p in complete_checkpoints(self.root)] if self.rank == 0 else None)
        if self.rank == 0:
            for partial in sorted(self.root.glob("step-*.tmp")):
                log.warning("skipping partially written checkpoint %s (no %s marker)", partial, COMPLETE)
        for cand in candidates:
            path = Path(cand)
            try:
                names = sorted(json.loads((path / COMPLETE).read_text())["files"])
            except (OSError, ValueError, KeyError):
                names = []
            problem = checkpoint_problem(path, names[self.rank::self.world_size], self.verify) if names \
                else f"unreadable {COMPLETE} marker"
            problems = [p for p in self._gather(problem) if p]
            if not problems:
                return path
            if self.rank == 0:
                log.warning("skipping corrupted checkpoint %s: %s", path, "; ".join(problems))
        return None

    def load(self, path: Path, state: dict[str, Any]) -> None:
        """Fill `state` in place from checkpoint `path` (resharding to this world size)."""
        try:
            dcp.load(state, checkpoint_id=str(path))
        except Exception as exc:  # DCP wraps per-rank failures in CheckpointException
            raise RobodataError(f"cannot load checkpoint {path}: {exc}") from exc


def checkpoint_keys(path: Path) -> set[str]:
    """Flattened state keys stored in a DCP checkpoint."""
    return set(dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata)


def load_full_tensors(path: str | Path, prefix: str = "model.") -> dict[str, torch.Tensor]:
    """Unsharded tensors under `prefix` from a DCP checkpoint, in one process (no process group)."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    md = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
    out = {k: torch.empty(m.size, dtype=m.properties.dtype) for k, m in md.items()
           if k.startswith(prefix) and isinstance(m, TensorStorageMetadata)}
    if not out:
        raise RobodataError(f"checkpoint {path} holds no tensors under {prefix!r}")
    dcp.load(out, checkpoint_id=str(path), no_dist=True)
    return {k[len(prefix):]: v for k, v in out.items()}
