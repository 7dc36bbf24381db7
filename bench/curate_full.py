"""One process of bench.curate: time a full-table spec over one catalog, with this process's own peak RSS.

    python -m bench.curate_full --catalog URI --spec full|full_v1|quality --out DIR [--runs 3] [--plain]
        [--s3-endpoint URL]

Prints one JSON line: best and first seconds of `runs` spec -> manifest runs (wall) and the CPU
seconds (user + sys, this process's threads) of the best run, the bytes this process read (rchar,
of the best run: the table's data files, the Delta log and the manifest read back; on S3 what came
over the network is counted by the server instead), the content hash, `rows_hash` (the content hash
of the same rows under spec hash "": equal for equal rows, whatever the catalog version), `v2_hash`
(the rows under content hash scheme v2, with the spec hash and the catalog version read: what PINNED
holds), the episodes, how the spec was evaluated, and peak_rss_mb of this process (the curation
alone: the catalog is generated elsewhere). `--plain` makes every spec take the plain scan (the
reference for the budget order). `--s3-endpoint`: the catalog is on that (loopback) S3 server.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
from typing import Any

from bench.common import peak_rss_mb
from bench.curate_catalog import SPLIT_SALT
from robodata.catalog.schema import MANIFEST_SCHEMA
from robodata.catalog.table import Catalog, CatalogConfig
from robodata.curate import ordered
from robodata.curate.manifest import HASH_SCHEMES, content_hash, read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict

PART_OF = "curate"  # a process of bench.curate, not a bench (bench/suite.py)

NARROW: dict[str, Any] = {
    "version": 1,
    "name": "bench-fold",
    "filters": [
        {"column": "day", "op": "between", "value": ["2024-01-03", "2024-01-09"]},
        {"column": "task", "op": "in", "value": ["fold_towel", "fold_shirt", "hang_cloth", "box_pack"]},
        {"column": "quality_score", "op": ">=", "value": 0.6},
        {"column": "qc_status", "op": "==", "value": "pass"},
        {"column": "success", "op": "==", "value": True},
    ],
    "mix": {"by": "task", "weights": {"fold_towel": 3, "fold_shirt": 2, "hang_cloth": 1, "box_pack": 1}},
    "budget": {"total_hours": 2500, "per_group_hours": {"box_pack": 150}},
    "exclude": {"robots": ["sfo-1-r003", "aus-1-r017"], "batches": ["batch-20"]},
    "split": {"val_fraction": 0.05, "salt": SPLIT_SALT},
}
FULL_V1: dict[str, Any] = {**NARROW, "filters": NARROW["filters"][1:]}  # the bench spec without its day filter
SPECS: dict[str, dict[str, Any]] = {
    "narrow": NARROW,
    "full_v1": FULL_V1,  # version 1: the pinned hashes below
    "full": {**FULL_V1, "version": 2, "name": "bench-fold2"},  # the same, version 2: the budget order
    "quality": {
        "version": 1,
        "name": "bench-quality",
        "filters": [
            {"column": "quality_score", "op": ">=", "value": 0.9},
            {"column": "qc_status", "op": "==", "value": "pass"},
        ],
        "split": {"val_fraction": 0.05, "salt": SPLIT_SALT},
    },
}
# Content hashes the eager evaluation of main 6d94797 (before issue 28) wrote over the bench's
# arrival catalogs with the version-1 specs: (catalog rows, spec) -> (hash, episodes).
# They are of scheme v2 (spec hash, catalog version, rows), which main wrote: compare `v2_hash`, the
# written rows hashed with v2 again, since new manifests are v3 (rows and spec only, issue 41).
PINNED: dict[tuple[int, str], tuple[str, int]] = {
    (10_000, "full_v1"): ("804c6f5478867a9f7783704f10e1756d504dc48129bd46e5b3c7b7be05451f9f", 3997),
    (10_000, "quality"): ("de3fbfc9eff843aff0c71b8d7f9bf7922d8536b86b00959795b4f94f74e6a444", 1988),
    (100_000, "full_v1"): ("4d089fcaebee5e4ce7fed5ef482d73d2927497414a323259d47f7f207df50f4d", 34911),
    (100_000, "quality"): ("09ea066f2a76adecf4937153394fa237135dbd9c077d2e331d7a0884cfdc843a", 20076),
    (500_000, "full_v1"): ("8555a0b66b4bd44d2140888c4c510c17ab115af77a63a213f7a2963ab2bc1ec5", 82391),
    (500_000, "quality"): ("858acdb983f3bf989f657587d2ab6fdaf2b98f63c974cdd40ca542f30497b02f", 99881),
    (5_000_000, "full_v1"): ("ed17325f321c0bdd262aa5d053a9a2092b5d9bc7a3c2f6239730abb99ac1c5a7", 82600),
    (5_000_000, "quality"): ("abb46b0d2780116acaf1134c77e56567c5ffd8d337eece906c9905d12ce4a9a8", 999795),
}


def run(catalog: Catalog, spec_name: str, out: Path, runs: int) -> dict[str, Any]:
    spec = spec_from_dict(SPECS[spec_name])
    times: list[tuple[float, float, int]] = []
    info = selection = None
    for i in range(runs):
        info = selection = None  # the last run's rows are not held through the next one's
        t, c, r = time.perf_counter(), _cpu(), _rchar()
        info, selection = curate(spec, catalog, out / f"run{i}")
        times.append((time.perf_counter() - t, _cpu() - c, _rchar() - r))
    assert info is not None and selection is not None
    best = min(times)
    rows = read_manifest(info.path).cast(MANIFEST_SCHEMA)
    return {
        "best_s": round(best[0], 3),
        "best_cpu_s": round(best[1], 3),
        "first_s": round(times[0][0], 3),
        "bytes_read": best[2],
        "content_hash": info.content_hash,
        "rows_hash": content_hash(rows, ""),
        "v2_hash": HASH_SCHEMES["v2"](rows, info.spec_hash, info.read_version),
        "episodes": info.episodes,
        "evaluated_by": selection.evaluated_by,  # "budget order", or "plain scan: <why>"
        "path": info.path,
        "peak_rss_mb": peak_rss_mb(include_children=False),
    }


def _rchar() -> int:
    """Bytes this process has read through read() and pread() (its data files, on a local disk)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def s3_catalog(uri: str, endpoint: str) -> Catalog:
    """The catalog at `uri` (s3://...) on the loopback S3 server at `endpoint`."""
    opts = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    return Catalog(CatalogConfig(uri=uri, storage_options=opts))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--spec", choices=sorted(SPECS), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--s3-endpoint", default="")
    args = ap.parse_args()
    if args.plain:
        ordered.why_not = lambda *a, **k: "--plain"
    cat = s3_catalog(args.catalog, args.s3_endpoint) if args.s3_endpoint else Catalog(args.catalog)
    print(json.dumps(run(cat, args.spec, Path(args.out), args.runs), sort_keys=True))


if __name__ == "__main__":
    main()
