"""Real recordings benchmark: every committed real fixture (tests/data/real/) ingested as a landing
zone of its own, each converted episode checked against an independent reader of the source, and
a LeRobot export of the converted episodes read back with pyarrow against the same reader.

    python -m bench.realdata --quick    # --smoke: the fixtures marked smoke (seconds)

datasets.<name>:
    format: the recording's kind; items: landing items of the fixture; converted / quarantined:
        items with a passing container / with a quarantine row (reason in qc_results).
    frames_expected: rows the source holds (a camera's frames, or state steps without a camera),
        by the independent reader; frames_kept: what the containers hold (the fullest camera's
        frames, or state steps).
    values_exact: every converted episode's state, action (the streams its container's roles name)
        and the fixture's other streams equal the source's values exactly (float32); null if none.
    export_roundtrip_exact: a LeRobot export of the converted episodes, read back with pyarrow, has
        the source's frame count, state and action for each (an episode whose source has no action
        must be refused instead, naming its streams); null if none converted.
wrong_values: converted episodes with a value that differs from the source's.
frames_lost: |expected - kept| frames summed over converted episodes and cameras.
silently_skipped: landing entries, and source episodes, that became neither an item nor a row.
exports_wrong: episodes whose export differs from the source (or was refused / written wrongly).
fixtures_missing: fixtures whose data is not on this machine (their records are committed under
    tests/data/real/<name>/SOURCE.md, the recordings are not): not run, and listed here.

Fixtures are declared in bench.realdata_fixtures (and any module named in MODULES exposing FIXTURES).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import emit, parse, size_of
from bench.realdata_fixtures import REAL, WHERE, Episode, Fixture, present

KEYS = ("datasets", "wrong_values", "frames_lost", "silently_skipped", "exports_wrong", "peak_rss_mb")
MODULES = ("bench.realdata_fixtures", "bench.realdata_bags")  # each exposes FIXTURES


def fixtures(smoke: bool) -> list[Fixture]:
    out = [f for m in MODULES for f in importlib.import_module(m).FIXTURES]
    return [f for f in out if f.smoke] if smoke else out


def _ingest(fx: Fixture, work: Path) -> tuple[Path, str, Any]:
    """The fixture as the one entry of a landing zone, ingested as one batch."""
    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.pipeline import run_batch
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.tables import IngestPaths

    land = work / "landing"
    src = REAL / fx.entry
    dst = land / (fx.name if src.is_dir() and not src.suffix else src.name)
    land.mkdir(parents=True)
    (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    opts = {
        k: str(REAL / v) if k in ("msgs", "topics_file", "key_map", "qc_file") else v for k, v in fx.settings.items()
    }
    settings = IngestSettings.from_dict(opts)
    items = new_items(str(land), LandingCursor())
    paths = IngestPaths(str(work / "root"))
    write_manifest(paths, "real", items)
    run_batch(paths, "real", settings, derived=False)
    return land, str(dst), paths


def _counts(reader) -> dict[str, int]:
    out: dict[str, int] = {}
    for ch in reader.chunks:
        for p in ch.parts:
            out[p.stream] = out.get(p.stream, 0) + p.count
    return out


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def _container(uri: str, ep: Episode) -> tuple[int, int, bool]:
    """(frames kept, frames lost, values exact) of one container against the source episode."""
    from robodata.container import EpisodeReader

    r = EpisodeReader.open(uri)
    counts = _counts(r)
    roles = r.meta.extra.get("roles") or {}
    # the state as the container's roles name it; a source that declares none (a transform / IMU bag)
    # has its values under `extra`, the first of which then counts its steps
    steps = roles.get("state") or next(iter(ep.extra), "")
    lost = sum(abs(n - counts.get(cam, 0)) for cam, n in ep.frames.items())
    if not ep.frames:
        lost = abs(len(ep.state) - counts.get(steps, 0))
    kept = max((counts.get(c, 0) for c in ep.frames), default=counts.get(steps, 0))
    names = [s for s in (roles.get("state"), roles.get("action"), *ep.extra) if s]
    win = r.read_window(0.0, r.meta.duration_s + 1.0, streams=names) if names else {}

    def values(stream: str | None) -> np.ndarray | None:
        return None if not stream or stream not in win else win[stream].data.reshape(len(win[stream].t), -1)

    exact = not roles.get("state") or _same(values(roles["state"]), ep.state)
    exact = exact and _same(values(roles.get("action")), ep.action)
    exact = exact and all(_same(values(s), v) for s, v in ep.extra.items())
    r.close()
    return kept, lost, exact


def _export(rows: list[dict], eps: dict[str, Episode], out: Path) -> tuple[bool | None, int]:
    """(export_roundtrip_exact, episodes wrong) of a LeRobot export of `rows` (episode_id -> eps)."""
    import pyarrow.parquet as pq

    from robodata.errors import RobodataError
    from robodata.export.lerobot import export_lerobot

    if not rows:
        return None, 0
    refuse = [r for r in rows if eps[r["episode_id"]].action is None]
    try:
        export_lerobot(rows, out)
    except RobodataError as exc:  # right only where a source has no action and the reason names streams
        ok = bool(refuse) and "streams are" in str(exc)
        return ok, 0 if ok else len(rows)
    if refuse:
        return False, len(refuse)
    data = pq.read_table(next((out / "data").glob("*/*.parquet")))
    index = {
        r["episode_index"]: r["robodata/episode_id"]
        for r in pq.read_table(next((out / "meta" / "episodes").glob("*/*.parquet"))).to_pylist()
    }
    wrong = 0
    col = data["episode_index"].to_numpy()
    for i, eid in index.items():
        ep, sel = eps[eid], np.flatnonzero(col == i)
        state = np.array(data["observation.state"].take(sel).to_pylist(), np.float32)
        action = np.array(data["action"].take(sel).to_pylist(), np.float32)
        want_state = ep.state if ep.export_state is None else ep.export_state
        want_action = ep.action if ep.export_action is None else ep.export_action
        if len(sel) != ep.steps or not (_same(state, want_state) and _same(action, want_action)):
            wrong += 1
    wrong += len(rows) - len(index)
    return wrong == 0, wrong


def run_fixture(fx: Fixture, work: Path) -> tuple[dict[str, Any], dict[str, int]]:
    land, entry, paths = _ingest(fx, work)
    expected = fx.read(REAL / fx.entry)
    aligned = paths.read("aligned_tracks", "real").to_pylist()
    conv = {r["uri"]: r for r in paths.read("conversions", "real").to_pylist()} if paths.has("conversions") else {}
    summary = {r["uri"]: r for r in paths.read("qc_results", "real").to_pylist() if r["stage"] == "summary"}
    listed = {r["uri"].split("#", 1)[0] for r in aligned}
    skipped = len({str(p) for p in land.iterdir()} - listed)
    d: dict[str, Any] = {"format": fx.format, "items": len(aligned), "converted": 0, "quarantined": 0}
    d |= {"frames_expected": 0, "frames_kept": 0}
    t = {"wrong_values": 0, "frames_lost": 0, "exports_wrong": 0}
    seen, rows, eps = set(), [], {}
    for a in aligned:
        key = fx.key(a["uri"].partition("#")[2])
        ep = expected.get(key)
        seen.add(key)
        c, q = conv.get(a["uri"]), summary.get(a["uri"])
        if q is None or not q["passed"] or c is None or not c["ok"]:
            d["quarantined"] += int(q is not None and not q["passed"])
            skipped += int(q is None)
            continue
        d["converted"] += 1
        if ep is None:  # converted, but the independent reader has no such episode: wrong
            t["wrong_values"] += 1
            continue
        kept, lost, exact = _container(c["container_uri"], ep)
        d["frames_expected"] += ep.steps
        d["frames_kept"] += kept
        t["frames_lost"] += lost
        t["wrong_values"] += int(not exact)
        eps[c["episode_id"]] = ep
        rows.append({k: c[k] for k in ("episode_id", "footer_offset", "footer_length")} | {"uri": c["container_uri"]})
    skipped += len(set(expected) - seen)
    d["values_exact"] = (t["wrong_values"] == 0) if d["converted"] else None
    d["export_roundtrip_exact"], t["exports_wrong"] = _export(rows, eps, work / "export")
    return d, t | {"silently_skipped": skipped}


def main(argv: list[str] | None = None) -> None:
    args = parse(__doc__ or "", argv)
    size = size_of(args)
    datasets: dict[str, Any] = {}
    totals = {"wrong_values": 0, "frames_lost": 0, "silently_skipped": 0, "exports_wrong": 0}
    missing = [fx.name for fx in fixtures(size == "smoke") if not present(fx.entry)]
    if missing:
        print(f"fixtures whose data is not here ({WHERE}): {', '.join(missing)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-realdata-") as tmp:
        for fx in fixtures(size == "smoke"):
            if fx.name in missing:
                continue
            d, t = run_fixture(fx, Path(tmp) / fx.name)
            datasets[fx.name] = d
            for k in totals:
                totals[k] += t[k]
    emit({"datasets": datasets, **totals, "fixtures_missing": missing, "data_root": str(REAL), "size": size})


if __name__ == "__main__":
    main()
