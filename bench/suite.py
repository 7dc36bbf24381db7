"""The benches: which modules are benches, the keys each promises, and running one.

A bench is a module bench/<name>.py with an `if __name__ == "__main__":` block. It takes
--smoke / --quick (bench.common.parse) and its last stdout line is one JSON object that always has
the keys it declares, at every size, as a module-level literal:

    KEYS = ("peak_rss_mb", "lost", "wam.vs_best_baseline")   # dotted: a key inside a nested object

A bench that declares no KEYS is held to DEFAULT_KEYS (the house rule: every result has
peak_rss_mb). Helper modules (bench/<bench>_<part>.py, common, suite) have no __main__ block and
are not benches. A part that must run as a process of its own (a measurement in another venv)
keeps its __main__ block and says whose part it is with a module-level literal, which makes it
no bench either:

    PART_OF = "lerobot_peer"
 Discovery reads the sources (ast), so listing the benches imports none of them;
a new bench file is picked up by tests/core/test_bench_smoke.py and `make bench-quick` as it is.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_PKG = Path(__file__).resolve().parent
REPO = BENCH_PKG.parent
DEFAULT_KEYS = ("peak_rss_mb",)


@dataclass(frozen=True)
class Bench:
    name: str
    path: Path
    keys: tuple[str, ...]
    declared: bool  # False: the module has no KEYS and is held to DEFAULT_KEYS


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    names = [node.test.left, *node.test.comparators]
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in names) and any(
        isinstance(n, ast.Constant) and n.value == "__main__" for n in names
    )


def _assigned(tree: ast.Module, name: str) -> ast.expr | None:
    """The value of a module-level `name = ...` (annotated or not), or None."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id == name and isinstance(node, ast.Assign | ast.AnnAssign):
            return node.value
    return None


def _declared_keys(path: Path, tree: ast.Module) -> tuple[str, ...] | None:
    value = _assigned(tree, "KEYS")
    if value is None:
        return None
    try:
        keys = ast.literal_eval(value)
    except ValueError as exc:
        raise ValueError(f"{path}: KEYS must be a literal tuple of strings") from exc
    if not isinstance(keys, tuple | list) or not all(isinstance(k, str) and k for k in keys):
        raise ValueError(f"{path}: KEYS must be a literal tuple of non-empty strings")
    return tuple(keys)


def discover(package: Path = BENCH_PKG) -> list[Bench]:
    """Every bench module in `package`, by name."""
    out = []
    for path in sorted(package.glob("*.py")):
        if path.name.startswith("_"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        if not any(_is_main_guard(node) for node in tree.body) or _assigned(tree, "PART_OF") is not None:
            continue
        keys = _declared_keys(path, tree)
        out.append(Bench(path.stem, path, keys if keys is not None else DEFAULT_KEYS, keys is not None))
    return out


def missing_keys(result: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """The keys (dotted for nested objects) that `result` lacks."""
    missing = []
    for key in keys:
        node: Any = result
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                missing.append(key)
                break
            node = node[part]
    return missing


def last_json(stdout: str) -> dict[str, Any] | None:
    """The last non-empty stdout line as a JSON object, or None when it is not one."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Outcome:
    bench: Bench
    size: str
    rc: int  # -1: killed at the timeout
    wall_s: float
    result: dict[str, Any] | None
    missing: list[str]
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.result is not None and not self.missing

    def tail(self, chars: int = 3000) -> str:
        return f"--- stdout ---\n{self.stdout[-chars:]}\n--- stderr ---\n{self.stderr[-chars:]}"


TERM_GRACE_S = 30.0  # a timed-out bench gets SIGTERM first, to stop what it started, then SIGKILL


def machine_factor() -> float:
    """How much slower than a quiet machine this one is now: the 1-minute load average per core
    (at least 1). Time limits of tests and benches scale with it (a fixed limit failed, and leaked,
    on a loaded CI machine)."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:  # pragma: no cover - no load average on this platform
        return 1.0


def scaled_timeout(base_s: float, cap: float = 6.0) -> float:
    """`base_s` on a quiet machine, up to `cap` times it on a loaded one (machine_factor)."""
    return base_s * min(machine_factor(), cap)


def run(bench: Bench, size: str, timeout_s: float, cwd: Path | None = None) -> Outcome:
    """`python -m bench.<name> --<size>` in a subprocess (cwd: where .bench/ goes; default the repo).
    At the timeout its process group gets SIGTERM (a bench stops the servers it started, each in a
    group of its own: robodata_testing.procs), then SIGKILL after TERM_GRACE_S."""
    if size not in ("smoke", "quick"):
        raise ValueError(f"size must be 'smoke' or 'quick', not {size!r}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    cmd = [sys.executable, "-m", f"bench.{bench.name}", f"--{size}"]
    t0 = time.perf_counter()
    # its own session, so a timeout reaches what the bench started (training ranks, servers) too
    proc = subprocess.Popen(
        cmd, cwd=cwd or REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        rc, stderr = -1, stderr + f"\n[timed out after {timeout_s:g}s]"
    with contextlib.suppress(ProcessLookupError):  # anything it left behind
        os.killpg(proc.pid, signal.SIGKILL)
    wall = time.perf_counter() - t0
    result = last_json(stdout)
    missing = missing_keys(result, bench.keys) if result is not None else list(bench.keys)
    return Outcome(bench, size, rc, round(wall, 1), result, missing, stdout, stderr)
