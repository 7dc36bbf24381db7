"""bench.robustness section "curation": altered sidecars and heads never reach a manifest.

An optimized catalog with hostile rows (null, zero, negative and NaN durations, null tasks and
sites: tests/core/test_curate_golden.py's) holds, beside each data file, its row sidecar
(robodata.catalog.sidecar) and its head (robodata.catalog.headpack). Each case damages one of
them: one byte flipped anywhere, the file cut short, another file's copy put in its place, or
the file removed. Then every budgeted spec (the golden ones: decided on the heads' prefixes,
on the sidecars' prefixes and stored hashes, or with hashed ids) is evaluated and compared with
the plain scan of the same version. `silent_wrong` counts manifests that differ without an error,
`raw_errors` exceptions outside RobodataError, `decided_on_prefixes` the undamaged evaluations
the heads decided (so the cases do reach them).

    python -c "from bench.robustness_curation import run; print(run('quick'))"
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import BENCH_DIR
from robodata.catalog import sidecar
from robodata.catalog.maintenance import OptimizeConfig, optimize
from robodata.curate import prefix
from robodata.curate.select import evaluate, select
from robodata.curate.spec import spec_from_dict
from robodata.errors import RobodataError
from tests.core.test_curate_golden import SPECS, golden_catalog

SIZES = {"smoke": 20, "quick": 150, "full": 2000}  # cases
KINDS = ("byte", "cut", "swap", "remove")
WEIGHTS = (3, 1, 1, 1)  # a byte flipped: half the cases


def _budgeted() -> list[str]:
    return [name for name, doc in SPECS.items() if doc.get("budget")]


def run(size: str) -> dict[str, Any]:
    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="robust-curation-", dir=BENCH_DIR))
    rng = random.Random(28)
    try:
        cat = golden_catalog(work / "catalog")
        optimize(cat, None, OptimizeConfig(row_group_rows=1024, split_salt="bench"))  # fold specs' salt
        names = _budgeted()
        specs = {n: spec_from_dict(SPECS[n]) for n in names}
        want = {n: evaluate(specs[n], pl.scan_delta(cat.table()))[0] for n in names}
        decided = _decided(cat, specs, want)
        folder = Path(cat.uri) / sidecar.SIDECAR_DIR
        files = sorted([*folder.glob("*" + sidecar.SUFFIX), *folder.glob("*" + sidecar.HEAD_SUFFIX)])
        counts = {"cases": 0, "silent_wrong": 0, "raw_errors": 0, "refused": 0}
        by_kind = dict.fromkeys(KINDS, 0)
        for _ in range(SIZES[size]):
            target = rng.choice(files)
            kind = rng.choices(KINDS, WEIGHTS)[0]
            saved = target.read_bytes()
            _damage(target, saved, kind, files, rng)
            try:
                for n in names:
                    try:
                        got = select(specs[n], cat).rows
                    except RobodataError:
                        counts["refused"] += 1
                        continue
                    except Exception:  # noqa: BLE001 - what this section counts
                        counts["raw_errors"] += 1
                        continue
                    counts["silent_wrong"] += not got.equals(want[n])
            finally:
                target.write_bytes(saved)
            counts["cases"] += 1
            by_kind[kind] += 1
        return {**counts, "specs": len(names), "by_kind": by_kind, "decided_on_prefixes": decided}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _damage(target: Path, saved: bytes, kind: str, files: list[Path], rng: random.Random) -> None:
    if kind == "byte":
        at = rng.randrange(len(saved))
        target.write_bytes(saved[:at] + bytes([saved[at] ^ rng.randrange(1, 256)]) + saved[at + 1 :])
    elif kind == "cut":
        target.write_bytes(saved[: rng.randrange(len(saved))])
    elif kind == "swap":
        same = [f for f in files if f != target and f.suffix == target.suffix]
        target.write_bytes(rng.choice(same).read_bytes())
    else:
        target.unlink()


def _decided(cat: Any, specs: dict, want: dict) -> int:
    """How many of the specs the heads' prefixes decide on the undamaged catalog (their rows checked)."""
    count = 0
    real = prefix.decide

    def decide(*args: Any) -> Any:
        nonlocal count
        got = real(*args)  # raises Unproven where the prefixes cannot decide
        count += 1
        return got

    prefix.decide = decide  # type: ignore[assignment]  # counted, then put back
    try:
        for n, spec in specs.items():
            assert select(spec, cat).rows.equals(want[n]), n
    finally:
        prefix.decide = real
    return count
