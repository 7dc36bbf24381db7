"""bench.robustness paths section: names and paths that try to escape their roots.

Each case feeds a hostile name or path to real code (ingestion of the hostile landing items of
tests/core/helpers_hostile.py: escaping ids, stream names, LeRobot templates, symlinks out of
the zone, on one and on two worker processes; `export --format lerobot` of containers whose
camera names escape, or into a folder with a symlink out; `export --format mcap` of ids that
escape; a curation spec whose `exclude.episode_ids_file` names a file outside its folder).
Everything hostile points into a sentinel folder outside every root.

escaped_writes: files created or changed outside the case's root (a snapshot of the whole bench
folder before and after, and inotify on the sentinel: sees C code and worker processes too).
escaped_reads: opens or listings inside the sentinel (inotify IN_OPEN / IN_ACCESS, and a
sys.addaudithook on `open` / `os.listdir` / `os.scandir` for Python-level opens).

    python -c "from bench.robustness_paths import run; print(run('quick'))"
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from robodata.errors import RobodataError
from tests.core.helpers_hostile import TOPICS, build, container_with

IN_ACCESS, IN_MODIFY, IN_CLOSE_WRITE, IN_OPEN, IN_MOVED_TO, IN_CREATE, IN_DELETE = (
    0x1,
    0x2,
    0x8,
    0x20,
    0x80,
    0x100,
    0x200,
)
READ_MASK, WRITE_MASK = IN_ACCESS | IN_OPEN, IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE


class Inotify:
    """inotify (Linux, via libc) on a folder tree: sees opens and writes by any process."""

    def __init__(self, root: Path):
        self.fd = -1
        self.dirs: dict[int, Path] = {}
        if not sys.platform.startswith("linux"):
            return
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        for d in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]:
            wd = libc.inotify_add_watch(self.fd, str(d).encode(), READ_MASK | WRITE_MASK)
            if wd >= 0:
                self.dirs[wd] = d

    def events(self) -> list[tuple[int, Path]]:
        out: list[tuple[int, Path]] = []
        while self.fd >= 0:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                wd, mask, _, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16 : i + 16 + n].rstrip(b"\0").decode(errors="replace")
                out.append((mask, self.dirs.get(wd, Path("?")) / name))
                i += 16 + n
        return out

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


class Audit:
    """Python-level opens and listings under `area` while armed (audit hooks cannot be removed)."""

    def __init__(self, area: Path):
        self.area = str(area.resolve())
        self.armed = False
        self.hits: list[str] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if not self.armed or event not in ("open", "os.listdir", "os.scandir"):
            return
        p = args[0] if args else None
        if isinstance(p, (str, bytes, os.PathLike)):
            try:
                full = os.path.realpath(os.fsdecode(p))
            except (TypeError, ValueError):
                return
            if full == self.area or full.startswith(self.area + os.sep):
                self.hits.append(f"{event} {full}")


def _snapshot(base: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _, files in os.walk(base):
        for f in files:
            p = Path(dirpath, f)
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p.relative_to(base))] = (st.st_size, st.st_mtime_ns)
    return out


def _case_ingest(land, base: Path, workers: int, only: set[str] | None) -> Callable[[], str]:
    def case() -> str:
        from robodata.ingest.landing.batch import write_manifest
        from robodata.ingest.landing.scan import LandingCursor, new_items
        from robodata.ingest.pipeline import run_batch
        from robodata.ingest.settings import IngestSettings
        from robodata.ingest.tables import IngestPaths
        from tests.core.helpers_hostile import item_name

        items = new_items(str(land.landing), LandingCursor())
        if only is not None:
            items = [i for i in items if item_name(i.uri) in only | set(land.good)]
        state_paths = IngestPaths(str(base / "state"))
        s = IngestSettings(workers=workers, topics=TOPICS)
        batch = f"paths-w{workers}"
        write_manifest(state_paths, batch, items)
        out = run_batch(state_paths, batch, s, derived=False)
        return f"{out['qc_results']['quarantined']} quarantined, {out['qc_results']['passed']} passed"

    return case


def _expect_refusal(fn: Callable[[], object]) -> Callable[[], str]:
    def case() -> str:
        try:
            fn()
        except RobodataError as exc:
            return f"refused: {type(exc).__name__}"
        return "accepted"

    return case


Case = tuple[Callable[[], str], tuple[str, ...]]  # (run it, the roots it may write under)


def _export_cases(base: Path, sentinel: Path) -> dict[str, Case]:
    from robodata.export.lerobot import export_lerobot
    from robodata.export.mcap_export import export_mcap

    src = base / "containers"
    src.mkdir()
    cases: dict[str, Case] = {}
    # from out/lrN/videos/observation.images.a (where a video of camera `a/...` goes) to the sentinel
    up = os.path.relpath(sentinel, base / "out" / "lr0" / "videos" / "observation.images.a")
    for i, cam in enumerate([f"a/{up}/wrist", up, str(sentinel / "cam"), "..", f"a/{up}/../sentinel"]):
        row = container_with(src / f"cam{i}.rdep", f"ep-cam-{i}", cam)
        cases[f"export-lerobot-camera-{i}"] = (
            _expect_refusal(partial(export_lerobot, [row], base / "out" / f"lr{i}")),
            (f"out/lr{i}/",),
        )
    good = container_with(src / "good.rdep", "ep-good", "wrist")
    linked = base / "out" / "lr-linked"
    linked.mkdir(parents=True)
    (linked / "videos").symlink_to(sentinel, target_is_directory=True)
    cases["export-lerobot-symlinked-out"] = (
        _expect_refusal(lambda: export_lerobot([good], linked)),
        ("out/lr-linked/",),
    )
    up = os.path.relpath(sentinel, base / "out" / "mc0")
    for i, eid in enumerate([f"{up}/x", str(sentinel / "abs"), "a/b", "..", "../x"]):
        run = _expect_refusal(partial(export_mcap, [good, dict(good, episode_id=eid)], base / "out" / f"mc{i}"))
        cases[f"export-mcap-id-{i}"] = (run, (f"out/mc{i}/",))
    return cases


def _spec_cases(base: Path, sentinel: Path) -> dict[str, Case]:
    """exclude.episode_ids_file outside the spec's folder (confinement owned by robodata.curate)."""
    from robodata.curate.spec import spec_from_dict

    specs = base / "specs"
    specs.mkdir()
    (specs / "ok.txt").write_text("ep-1\n")
    (specs / "link.txt").symlink_to(sentinel / "secret.txt")
    cases: dict[str, Case] = {}
    for i, f in enumerate([os.path.relpath(sentinel / "secret.txt", specs), str(sentinel / "secret.txt"), "link.txt"]):

        def case(f=f) -> str:
            try:
                spec = spec_from_dict({"version": 1, "name": "s", "exclude": {"episode_ids_file": f}})
                ids = spec.excluded_ids(specs)
            except RobodataError as exc:
                return f"refused: {type(exc).__name__}"
            return f"accepted ({len(ids)} ids)"

        cases[f"spec-episode-ids-file-{i}"] = (case, ())
    return cases


def run(size: str) -> dict:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robustness-paths-") as tmp:
        base = Path(tmp)
        land = build(base)
        sentinel = land.sentinel
        escaping = {c.name for c in land.cases if c.expect in ("names_safe", "outside")}
        cases: dict[str, Case] = {"ingest-hostile-landing": (_case_ingest(land, base, 1, None), ("state/",))}
        if size != "smoke":
            cases["ingest-escaping-items-2-workers"] = (_case_ingest(land, base, 2, escaping), ("state/",))
        cases.update(_export_cases(base, sentinel))
        cases.update(_spec_cases(base, sentinel))
        audit = Audit(sentinel)
        watch = Inotify(sentinel)
        results, writes, reads = {}, {}, {}
        for name, (case, allowed) in cases.items():
            before = _snapshot(base)
            watch.events()  # drop what the snapshot itself did
            audit.hits.clear()
            audit.armed = True
            try:
                results[name] = case()
            except Exception as exc:  # a raw error is not an escape, but is reported
                results[name] = f"raw {type(exc).__name__}: {exc}"[:200]
            finally:
                audit.armed = False
            seen = watch.events()
            after = _snapshot(base)
            changed = {p for p, v in after.items() if before.get(p) != v and not p.startswith(allowed)}
            changed |= {p for p in after if p.startswith("state/containers/") and not _container_ok(p)}
            changed |= {str(p) for m, p in seen if m & WRITE_MASK}
            opened = {str(p) for m, p in seen if m & READ_MASK} | {h.split(" ", 1)[1] for h in audit.hits}
            writes[name], reads[name] = sorted(changed), sorted(opened)
        watch.close()
    return {
        "cases": len(cases),
        "escaped_writes": sum(len(v) for v in writes.values()),
        "escaped_reads": sum(len(v) for v in reads.values()),
        "escaped_reads_by_case": {k: len(v) for k, v in reads.items() if v},
        "escaped_writes_by_case": {k: len(v) for k, v in writes.items() if v},
        "outcomes": results,
        "inotify": watch.fd >= 0,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def _container_ok(rel: str) -> bool:
    """state/containers/<batch>/<safe name>.rdep and nothing else."""
    from robodata.names import is_safe_name

    parts = rel.split("/")
    return len(parts) == 4 and is_safe_name(parts[2]) and parts[3].endswith(".rdep") and is_safe_name(parts[3])
