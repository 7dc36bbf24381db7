"""bench.robustness section "terms": curation specs with many filter terms (issue 44, item 3).

Each case curates one spec file over a small Delta catalog in a fresh process (`robodata.curate.run.curate`
on the file path: YAML parse, validation, predicate, scan, manifest) and reports the process's peak
RSS and CPU seconds. Cases: `in` and `>=` filters by the hundred up to the bound
(robodata.curate.spec.MAX_FILTERS) and twice it (refused, a ConfigError), the same 2,000 with the
bound lifted (what the evaluation itself costs past it), and a 2M-line exclusion file.

`spec_terms_max_rss_mb` is the largest peak RSS of the filter cases (the interpreter and its
imports included, ~190 MB); `two_thousand_terms` what a 2,000-term spec gives (issue 44: refused,
or <= 500 MB); `exclusion_file_2m_lines` the exclusion-file case, apart (its ids are one term).
Before the fix, 1,000 `in` filters took 7,588 MB and 50 CPU s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CURATE = r"""
import json, random, sys, time
import yaml
from bench.robustness_manifest import random_catalog
from robodata.catalog.table import Catalog
from robodata.curate.run import curate
from robodata.errors import RobodataError
import robodata.curate.spec as spec_module

folder, kind, n, bound = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if bound:
    spec_module.MAX_FILTERS = bound
cat = Catalog(folder + "/cat")
if not cat.exists():
    cat.merge(random_catalog(random.Random(1), 8))
doc = {"version": 1, "name": "terms"}
if kind == "in":
    doc["filters"] = [{"column": "task", "op": "in", "value": ["fold", "pick", "wipe", f"t{i}"]} for i in range(n)]
elif kind == "ge":
    doc["filters"] = [{"column": "quality_score", "op": ">=", "value": -1.0 - i} for i in range(n)]
else:
    with open(folder + "/ids.txt", "w") as f:
        f.write("\n".join(f"ep-{i:08d}" for i in range(n)))
    doc["exclude"] = {"episode_ids_file": "ids.txt"}
with open(folder + "/spec.yaml", "w") as f:
    yaml.safe_dump(doc, f)

def hwm():
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024

cpu = time.process_time()
try:
    info, selection = curate(folder + "/spec.yaml", cat, folder + "/m")
    out = f"selected {selection.rows.height}"
except RobodataError as exc:
    out = f"{type(exc).__name__}: {str(exc)[:160]}"
except Exception as exc:
    out = f"raw: {type(exc).__name__}: {str(exc)[:160]}"
print(json.dumps({"peak_rss_mb": hwm(), "cpu_s": time.process_time() - cpu, "outcome": out}))
"""
CASES = {
    "smoke": [("in", 100, 0), ("in", 2000, 0)],
    "quick": [
        ("in", 250, 0),
        ("in", 1000, 0),
        ("ge", 1000, 0),
        ("in", 2000, 0),
        ("in", 2000, 10**6),
        ("ids", 2_000_000, 0),
    ],
}
CASES["full"] = CASES["quick"] + [("in", 4000, 10**6), ("ge", 4000, 10**6)]


def _case(folder: Path, kind: str, n: int, bound: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CURATE, str(folder), kind, str(n), str(bound)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        return {"peak_rss_mb": 0.0, "cpu_s": 0.0, "outcome": f"raw: exit {out.returncode}: {out.stderr[-300:]}"}
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in got.items()}


def run(size: str) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, n, bound in CASES[size]:
            name = f"{kind}_{n}" + ("_unbounded" if bound else "")
            folder = Path(tmp) / name
            folder.mkdir()
            cases[name] = _case(folder, kind, n, bound)
    two = cases["in_2000"]
    terms = [c for name, c in cases.items() if not name.startswith("ids_")]
    return {
        "cases": len(cases),
        "raw_errors": sum(c["outcome"].startswith("raw") for c in cases.values()),
        "spec_terms_max_rss_mb": max(c["peak_rss_mb"] for c in terms),
        "exclusion_file_2m_lines": cases.get("ids_2000000"),
        "two_thousand_terms": {"refused": two["outcome"].startswith("ConfigError"), "peak_rss_mb": two["peak_rss_mb"]},
        "by_case": cases,
    }
