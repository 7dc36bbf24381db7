"""bench.robustness reasons section: step-array recordings whose quarantine reason used to be a
library's bare exception, or that lied and passed (issue 44 items 1, 2 and 9).

The cases of tests/core/helpers_reasons.py (RLDS: a step key holding another number of values than
its declared tensor shape, a feature given twice in one record (`is_last` mid-episode kept by a
reader that keeps the last), a TFRecord length field of 2**40 or 2**64-1, a features.json nested
100,000 deep, undecodable image bytes; Zarr: garbage or cut chunks in a camera or state array, a
rate of 10**400, meta/episode_ends short of the arrays; HDF5 ALOHA: garbage JPEG bytes, garbage in a
compressed chunk of the state or of a camera read lazily at conversion) go through the real
ingestion (robodata.ingest.pipeline.run_batch) in batches beside one good recording of each family.

    cases              hostile items
    raw_errors         reasons that are a library's exception (`converted: RuntimeError: ...`), show an
                       object repr (`<_io.BytesIO object at 0x...>`) or say nothing after the type
                       (`MemoryError: `), and exceptions out of run_batch
    passed             hostile items that passed QC (a lie accepted) or had no row
    unnamed            reasons that do not name the file and the field (Case.expect)
    batches_failed     batches where run_batch raised or a good recording did not pass

    python -m bench.robustness --quick --section reasons
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from robodata.errors import RobodataError
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth import make_episode
from robodata.ingest.synth.arrays import write_aloha, write_rlds, write_zarr
from robodata.ingest.tables import IngestPaths
from tests.core.helpers_reasons import CASES, TINY, write_case

RAW_REASON = re.compile(r"(?:^|; )[a-z_]+: ([A-Z][A-Za-z]*(?:Error|Exception)): ")
BARE = re.compile(r"object at 0x[0-9a-f]+|(?:Error|Exception): ?(?:;|$)")
GROUP = {"smoke": 7, "quick": 4, "full": 1}  # hostile items per batch


def _good(land: Path) -> list[str]:
    ep = make_episode(TINY, 1)
    rlds = write_rlds([ep], land, name="good_rlds")
    zarr = write_zarr([ep], land, name="good_zarr")
    aloha = write_aloha(ep, land, compress=True, index=99)
    shard = next((rlds / "1.0.0").glob("*.tfrecord*")).name
    return [f"good_rlds#1.0.0/{shard}:0", f"{zarr.name}#000000", aloha.name]


def bare(reason: str) -> bool:
    """A reason that is a library's exception, shows an object's repr or says nothing of what was wrong."""
    return bool(RAW_REASON.search(reason) or BARE.search(reason))


def run(size: str) -> dict:
    started = time.perf_counter()
    names = list(CASES)
    if size == "smoke":
        names = names[::3]
    with tempfile.TemporaryDirectory(prefix="robustness-reasons-") as tmp:
        root = Path(tmp)
        out: dict = {"cases": len(names), "raw_errors": 0, "passed": 0, "unnamed": 0, "batches_failed": 0}
        examples: list[str] = []
        state = root / "state"
        paths = IngestPaths(str(state))
        settings = IngestSettings(workers=1)
        group = GROUP[size]
        for b in range(0, len(names), group):
            land = root / f"landing{b:03d}"
            land.mkdir()
            good = _good(land)
            cases = [write_case(land, n) for n in names[b : b + group]]
            items = new_items(str(land), LandingCursor())
            batch = f"r{b:03d}"
            write_manifest(paths, batch, items)
            try:
                run_batch(paths, batch, settings, derived=False)
            except Exception as exc:  # a batch failed by one item: never
                out["batches_failed"] += 1
                out["raw_errors"] += not isinstance(exc, RobodataError)
                examples.append(f"{batch}: {type(exc).__name__}: {exc}"[:300])
                continue
            rows = [r for r in paths.read("qc_results", batch).to_pylist() if r["stage"] == "summary"]
            by_name = {next((i.name for i in items if i.uri == r["uri"]), r["uri"]): r for r in rows}
            if not all(by_name.get(g, {}).get("passed") for g in good):
                out["batches_failed"] += 1
                examples.append(f"{batch}: a good recording did not pass: {[by_name.get(g) for g in good]}"[:300])
            for c in cases:
                r = by_name.get(c.item)
                if r is None or r["passed"]:
                    out["passed"] += 1
                    examples.append(f"{c.name}: {'passed' if r else 'no row'}")
                    continue
                reason = r["reason"] or ""
                if bare(reason):
                    out["raw_errors"] += 1
                    examples.append(f"{c.name}: bare: {reason[:240]}")
                elif not all(e in reason for e in c.expect):
                    out["unnamed"] += 1
                    examples.append(f"{c.name}: missing {c.expect}: {reason[:240]}")
        out["families"] = sorted({CASES[n][0] for n in names})
        out["examples"] = examples[:8]
        out["wall_s"] = round(time.perf_counter() - started, 1)
        return out
