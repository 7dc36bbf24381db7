"""Start a training run: one rank here (under torchrun / a cluster launcher), or a local group.

Under an external launcher (RANK and WORLD_SIZE set) this process is one rank. Otherwise
it starts nodes x gpus_per_node local processes on 127.0.0.1 (torch.multiprocessing), the
"nodes" simulated on one machine, and waits; SIGTERM is forwarded to the ranks (they agree on
a step, checkpoint and exit), and if this launcher dies the ranks die with it.

    python -m robodata.train.launch CONFIG.yaml      # what `robodata train CONFIG` runs
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from robodata.errors import RobodataError
from robodata.train.config import TrainConfig, load_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    with contextlib.suppress(OSError):  # Linux: SIGKILL this rank when the launcher goes away
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _local_rank_main(index: int, cfg: TrainConfig, port: int, started_at: float) -> None:
    _die_with_parent()
    ws = cfg.topology.world_size
    os.environ.update(
        RANK=str(index),
        WORLD_SIZE=str(ws),
        LOCAL_RANK=str(index % cfg.topology.gpus_per_node),
        LOCAL_WORLD_SIZE=str(ws),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    from robodata.train.loop import run_worker

    run_worker(cfg, started_at)


def _start_method(cfg: TrainConfig, fresh_process: bool) -> str:
    if cfg.topology.start_method != "auto":
        return cfg.topology.start_method
    from robodata.train.mesh import resolve_device

    device, _ = resolve_device(cfg.topology)
    # fork skips re-importing torch in every rank, but is only safe from a process that has run
    # no torch ops (OpenMP pools do not survive fork), has no other threads and uses no CUDA
    safe = fresh_process and device == "cpu" and threading.active_count() == 1
    return "fork" if safe else "spawn"


def train(cfg: TrainConfig, fresh_process: bool = False) -> dict[str, Any]:
    """Run training to cfg.steps (resuming from the newest complete checkpoint) and return
    rank 0's result (also at run_dir/result.json). `fresh_process`: the caller is a
    command-line entry that has not used torch yet (local ranks may then be forked)."""
    started_at = time.time()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        from robodata.train.loop import run_worker

        return run_worker(cfg, started_at)
    import torch.multiprocessing as mp

    import robodata.train.loop  # noqa: F401  (imported once here; forked ranks inherit it)
    from robodata.train.lineage import code_version

    code_version()  # cached before the fork: ranks do not each run git
    Path(cfg.run_dir).mkdir(parents=True, exist_ok=True)
    result_path = Path(cfg.run_dir) / "result.json"
    result_path.unlink(missing_ok=True)
    ctx = mp.start_processes(
        _local_rank_main,
        args=(cfg, _free_port(), started_at),
        nprocs=cfg.topology.world_size,
        join=False,
        start_method=_start_method(cfg, fresh_process),
    )

    def forward(signum, _frame):  # preemption: every rank checkpoints at the next step and exits
        for p in ctx.processes:
            if p.is_alive():
                os.kill(p.pid, signum)

    prev = signal.signal(signal.SIGTERM, forward) if threading.current_thread() is threading.main_thread() else None
    try:
        while not ctx.join(timeout=1.0):
            pass
    except mp.ProcessRaisedException as exc:
        raise RobodataError(f"training rank {exc.error_index} failed:\n{exc}") from None
    except mp.ProcessExitedException as exc:
        raise RobodataError(
            f"training rank {exc.error_index} died ({exc}); rerun to resume from the newest "
            f"complete checkpoint in {cfg.checkpoint_dir}"
        ) from None
    finally:
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)
    try:
        return json.loads(result_path.read_text())
    except (OSError, ValueError) as exc:
        raise RobodataError(f"training finished but wrote no result at {result_path}: {exc}") from exc


def train_in_subprocess(cfg: TrainConfig, timeout_s: float | None = None) -> dict[str, Any]:
    """Run `python -m robodata.train.launch` on cfg in a fresh process (what the Dagster asset
    does: the host process keeps no torch state, the ranks can be forked cheaply, and a crash of
    the training stays out of the caller). The resolved config is kept at run_dir/config.yaml,
    the output appended to run_dir/launch.log. An interrupt of the caller is passed on as SIGTERM
    (the ranks checkpoint and stop)."""
    import dataclasses
    import subprocess

    import yaml

    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = run_dir / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(cfg)))))
    log_path = run_dir / "launch.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "robodata.train.launch", str(cfg_path)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    if rc not in (0, 3):
        tail = log_path.read_bytes()[-4000:].decode(errors="replace")
        raise RobodataError(f"training exited with {rc}; rerun to resume. End of {log_path}:\n{tail}")
    try:
        return json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError) as exc:
        raise RobodataError(f"training finished but wrote no result in {run_dir}: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m robodata.train.launch CONFIG.yaml", file=sys.stderr)
        return 2
    result = train(load_config(args[0]), fresh_process=True)
    print(json.dumps({k: v for k, v in result.items() if k != "ranks"}, default=str))
    return 0 if result["complete"] else 3  # 3: stopped early (SIGTERM); rerun to resume


if __name__ == "__main__":
    sys.exit(main())
