"""The code location as an image would have it: built into a wheel, installed outside the checkout,
loaded from there; and how long importing the definitions takes in a fresh process.

Used by bench.dagster_paths (wheel_load_ok, definitions_import_s) and tests/platform/test_packaging.py.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOAD = (
    "import robodata_dagster.assets as a, robodata_dagster.definitions as d\n"
    "defs = d.loaded(); defs.resolve_asset_graph(); defs.resolve_all_job_defs()\n"
    "print(a.__file__)\n"
)


def build_wheel(out: Path) -> Path:
    """`pip wheel --no-deps` of the checkout into `out` (the build backend is already installed)."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=out)
    if res.returncode != 0:
        raise RuntimeError(f"pip wheel failed: {res.stdout}{res.stderr}")
    (whl,) = out.glob("robodata-*.whl")
    return whl


def load_from_wheel(wheel: Path, tmp: Path) -> tuple[bool, str]:
    """Install `wheel` alone into tmp/site and load the code location from there, in tmp/elsewhere
    (no checkout on the path). Returns (ok, the loaded package's file or the error)."""
    target, cwd = tmp / "site", tmp / "elsewhere"
    cwd.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(target)]
    res = subprocess.run([*pip, str(wheel)], capture_output=True, text=True)
    if res.returncode != 0:
        return False, res.stdout + res.stderr
    env = dict(os.environ, PYTHONPATH=str(target), DAGSTER_HOME=str(tmp))
    res = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, cwd=cwd, env=env)
    if res.returncode != 0:
        return False, res.stderr[-2000:]
    loaded_from = res.stdout.strip().splitlines()[-1]
    return Path(loaded_from).is_relative_to(target), loaded_from


def definitions_import_s(runs: int = 3, cwd: Path | None = None) -> float:
    """Median wall time of `python -c 'import robodata_dagster.definitions'` over fresh processes."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import robodata_dagster.definitions"], check=True, cwd=cwd or REPO)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 3)
