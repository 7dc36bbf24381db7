"""Training faults for bench.resilience: a 2 x 2 CPU/gloo run (4 rank processes) on a tiny model.

kill_training_worker: SIGKILL ONE rank (not the launcher) mid-way between two checkpoints. The
    launcher must notice and fail the run (non-zero exit, not a hang until the collective timeout);
    a rerun resumes from the newest complete checkpoint and must end equal to an uninterrupted run,
    losing at most one checkpoint interval of steps.
corrupt_newest_checkpoint: flip one byte in a shard of the newest complete checkpoint; resume must
    skip it (per-file CRC32 in the COMPLETE marker), resume from the previous one and end equal.

data_lost counts complete, intact checkpoints that became unusable (or vanished) because of the
fault or the recovery. Both faults compare against one uninterrupted reference run (cached).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
INTERVAL = 4  # checkpoint.every_steps


def tiny_config(run_dir: Path, quick: bool) -> dict[str, Any]:
    return {
        "run_dir": str(run_dir),
        "steps": 16 if quick else 32,
        "global_batch_size": 8,
        "log_every": 4,
        "topology": {"nodes": 2, "gpus_per_node": 2, "timeout_s": 60},
        "data": {"episodes": 48, "image_size": 16},
        "model": {"channels": [8, 8], "latent_dim": 16, "hidden_dim": 32},
        "checkpoint": {"every_steps": INTERVAL, "keep": 10},
    }


def start(cfg: dict[str, Any]) -> subprocess.Popen:
    """`python -m robodata.train.launch CONFIG` in its own session (killpg reaches every rank)."""
    run_dir = Path(cfg["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir.parent / f"{run_dir.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS="1",
        PYTHONWARNINGS="ignore",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "robodata.train.launch", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -999, out  # hung
    return proc.returncode, out


def run_ok(cfg: dict[str, Any]) -> dict[str, Any]:
    rc, out = finish(start(cfg))
    if rc != 0:
        raise RuntimeError(f"training run {cfg['run_dir']} exited {rc}:\n{out[-3000:]}")
    return json.loads((Path(cfg["run_dir"]) / "result.json").read_text())


def children(pid: int) -> list[int]:
    """Direct child processes of pid, from /proc (Linux), oldest pid first."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return sorted(set(out))


def rank_pids(launcher_pid: int, world_size: int, timeout: float = 60) -> list[int]:
    """The launcher's rank processes (started in rank order), waiting until all are up. Ranks are
    forked or spawned python processes; short-lived helpers (git for the code version) are not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = [k for k in children(launcher_pid) if _is_python(k)]
        if len(kids) >= world_size:
            return kids[:world_size]
        time.sleep(0.05)
    raise RuntimeError(f"launcher {launcher_pid} did not start {world_size} ranks within {timeout}s")


def _is_python(pid: int) -> bool:
    try:
        exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return b"python" in Path(exe.decode(errors="replace")).name.encode()


def wait_for_step(run_dir: Path, proc: subprocess.Popen, step: int) -> int:
    beat = run_dir / "heartbeat.json"
    while proc.poll() is None:
        try:
            seen = int(json.loads(beat.read_text())["step"])
            if seen >= step:
                return seen
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.005)
    raise RuntimeError(f"run ended (rc {proc.returncode}) before reaching step {step}")


def usable_checkpoints(run_dir: Path) -> set[str]:
    from robodata.train.checkpoint import checkpoint_problem, complete_checkpoints

    return {Path(p).name for p in complete_checkpoints(run_dir / "checkpoints") if checkpoint_problem(p) is None}


def max_param_diff(a: Path, b: Path) -> float:
    """Largest absolute difference between two checkpoints' model params (inf if keys differ)."""
    from robodata.train.checkpoint import load_full_tensors

    pa, pb = load_full_tensors(a), load_full_tensors(b)
    if pa.keys() != pb.keys():
        return float("inf")
    return max(float((pa[k].double() - pb[k].double()).abs().max()) for k in pa)


_REFERENCE: dict[bool, dict[str, Any]] = {}


def reference(quick: bool) -> dict[str, Any]:
    """One uninterrupted run per process (and size), shared by both faults."""
    if quick not in _REFERENCE:
        where = Path(tempfile.mkdtemp(prefix="resilience-train-ref-"))
        atexit.register(shutil.rmtree, where, True)
        _REFERENCE[quick] = run_ok(tiny_config(where / "run", quick))
    return _REFERENCE[quick]


def _step_of(path: str | None) -> int | None:
    return int(Path(path).name.split("-")[1]) if path else None


def kill_training_worker(tmp: Path, quick: bool):
    from bench.resilience_fault import FaultResult

    ref = reference(quick)
    cfg = tiny_config(tmp / "run", quick)
    run_dir, ws = Path(cfg["run_dir"]), cfg["topology"]["nodes"] * cfg["topology"]["gpus_per_node"]
    usable_checkpoints(run_dir)  # imports torch now, not between the step we aim for and the kill
    proc = start(cfg)
    wait_for_step(run_dir, proc, 1)  # training: the launcher's short-lived helpers (git) are gone
    ranks = rank_pids(proc.pid, ws)
    kill_step = INTERVAL + INTERVAL // 2  # mid-way between two checkpoints
    wait_for_step(run_dir, proc, kill_step)
    before = usable_checkpoints(run_dir)
    victim = ranks[1]  # rank 1: a worker, not the launcher and not rank 0
    t_kill = time.perf_counter()
    os.kill(victim, signal.SIGKILL)
    rc, out = finish(proc, timeout=float(cfg["topology"]["timeout_s"]) + 60)
    detect_s = time.perf_counter() - t_kill
    leftovers = [p for p in ranks if Path(f"/proc/{p}").exists() and _alive(p)]
    failed_fast = rc not in (0, -999) and not leftovers
    last_beat = int(json.loads((run_dir / "heartbeat.json").read_text())["step"])
    t_restart = time.perf_counter()
    resumed = run_ok(cfg)
    resume_s = time.perf_counter() - t_restart
    lost = len(before - usable_checkpoints(run_dir))
    diff = max_param_diff(Path(ref["checkpoint"]), Path(resumed["checkpoint"]))
    lost_steps = int(resumed["goodput"]["lost_steps"])
    ok = (
        failed_fast
        and resumed["complete"]
        and diff <= 1e-6
        and lost_steps <= INTERVAL
        and resumed["resumed_from"] is not None
        and _step_of(resumed["resumed_from"]) == INTERVAL
    )
    return FaultResult(
        ok,
        lost,
        f"launcher rc={rc} after {detect_s:.1f}s, leftover ranks={leftovers}, "
        f"killed at step {last_beat}, resumed from {_step_of(resumed['resumed_from'])}, "
        f"lost_steps={lost_steps}, max|dparam|={diff:.2e}",
        {
            "detect_s": round(detect_s, 2),
            "lost_steps": lost_steps,
            "checkpoint_interval": INTERVAL,
            "resume_run_s": round(resume_s, 2),
            "max_param_diff": diff,
        },
    )


def _alive(pid: int) -> bool:
    try:  # a zombie (exited, not yet reaped) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def corrupt_newest_checkpoint(tmp: Path, quick: bool):
    from bench.resilience_fault import FaultResult

    ref = reference(quick)
    cfg = tiny_config(tmp / "run", quick)
    run_dir = Path(cfg["run_dir"])
    src = Path(ref["checkpoint"]).parent
    keep_steps = (INTERVAL, 2 * INTERVAL)  # as if the run stopped right after its second checkpoint
    for step in keep_steps:
        shutil.copytree(src / f"step-{step:08d}", run_dir / "checkpoints" / f"step-{step:08d}")
    newest = run_dir / "checkpoints" / f"step-{keep_steps[-1]:08d}"
    shard = sorted(newest.glob("__*.distcp"))[0]
    data = bytearray(shard.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 8):
        data[i] ^= 0xFF  # same size, wrong content: only the CRC can tell
    shard.write_bytes(bytes(data))
    intact_before = usable_checkpoints(run_dir)  # the older one; the newest is the fault itself
    t = time.perf_counter()
    rc, out = finish(start(cfg))
    seconds = time.perf_counter() - t
    if rc != 0:
        return FaultResult(False, len(intact_before), f"resume exited {rc}: {out[-1500:]}")
    resumed = json.loads((run_dir / "result.json").read_text())
    skipped = "skipping corrupted checkpoint" in out and "CRC32 mismatch" in out
    lost = len(intact_before - usable_checkpoints(run_dir))
    diff = max_param_diff(Path(ref["checkpoint"]), Path(resumed["checkpoint"]))
    ok = skipped and resumed["complete"] and _step_of(resumed["resumed_from"]) == INTERVAL and diff <= 1e-6
    return FaultResult(
        ok,
        lost,
        f"skipped={skipped} resumed from {_step_of(resumed['resumed_from'])}, max|dparam|={diff:.2e}",
        {"resume_run_s": round(seconds, 2), "max_param_diff": diff},
    )
