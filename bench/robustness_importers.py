"""bench.robustness importers section: hostile landing items inside batches of good ones.

Every hostile item of tests/core/helpers_hostile.py (names that escape, wrong types, truncated or
garbage files, symlinks out of the landing zone, clocks that jump back, duplicate ids, LeRobot
datasets without episodes or with escaping templates, differing camera sets among the good ones)
runs through the real ingestion stages (robodata.ingest.pipeline.run_batch) in a batch with the
four good items (two legacy folders with different camera sets, an MCAP, a LeRobot v3.0 dataset).

batches_failed_by_one_item: batches where run_batch raised, or a good item was not converted and
passed. Also counted: hostile items not quarantined, or quarantined without the expected phrase
in their reason (`unclear_reasons`). full: one hostile item per batch, quick: two (a failed batch
then names both), plus one batch of all of them on two worker processes; smoke: six items, two
per batch.

    python -c "from bench.robustness_importers import run; print(run('quick'))"
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.tables import IngestPaths
from tests.core.helpers_hostile import TOPICS, build, item_name


def _summaries(paths: IngestPaths, batch: str) -> dict[str, dict]:
    t = paths.read("qc_results", batch).to_pylist()
    return {item_name(r["uri"]): r for r in t if r["stage"] == "summary"}


def _one_batch(paths: IngestPaths, settings: IngestSettings, batch: str, items: list, good: list[str]):
    write_manifest(paths, batch, items)
    try:
        out = run_batch(paths, batch, settings, derived=False)
    except Exception as exc:  # the batch failed: exactly what must never happen
        return False, {"error": f"{type(exc).__name__}: {exc}"[:300]}, {}
    summary = _summaries(paths, batch)
    good_ok = all(summary.get(g, {}).get("passed") for g in good) and out["episodes"]["converted"] >= len(good)
    return good_ok, out, summary


def run(size: str) -> dict:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robustness-importers-") as tmp:
        root = Path(tmp)
        land = build(root)
        by_name = {item_name(i.uri): i for i in new_items(str(land.landing), LandingCursor())}
        good_items = [by_name[g] for g in land.good]
        cases = land.cases
        group = 1 if size == "full" else 2
        if size == "smoke":
            cases = [c for c in cases if c.family == "legacy"][:4] + [c for c in cases if c.family != "legacy"][:2]
        paths = IngestPaths(str(root / "state"))
        settings = IngestSettings(workers=1, topics=TOPICS)
        plans = [(f"b{i:03d}", cases[i : i + group], settings) for i in range(0, len(cases), group)]
        if size != "smoke":  # every hostile item at once, on the worker-process path
            pool = IngestSettings(workers=2, topics=TOPICS)
            plans.append(("ball", cases, pool))
        failed, not_quarantined, unclear, converted, expected = 0, [], [], 0, 0
        failures = []
        for batch, group_cases, s in plans:
            hostile = [by_name[c.name] for c in group_cases]
            ok, out, summary = _one_batch(paths, s, batch, good_items + hostile, land.good)
            expected += len(land.good)
            converted += sum(bool(summary.get(g, {}).get("passed")) for g in land.good)
            if not ok:
                failed += 1
                failures.append({"batch": batch, "items": [c.name for c in group_cases], **out})
                continue
            for c in group_cases:
                r = summary.get(c.name)
                if r is None or r["passed"]:
                    not_quarantined.append(c.name)
                elif c.expect not in r["reason"]:
                    unclear.append(f"{c.name}: {r['reason'][:160]}")
    return {
        "cases": len(cases),
        "batches": len(plans),
        "batches_failed_by_one_item": failed,
        "hostile_not_quarantined": len(not_quarantined),
        "unclear_reasons": len(unclear),
        "good_converted": converted,
        "good_expected": expected,
        "families": sorted({c.family for c in cases}),
        "examples": (failures + not_quarantined + unclear)[:5],
        "wall_s": round(time.perf_counter() - started, 1),
    }
