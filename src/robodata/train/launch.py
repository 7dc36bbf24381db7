"""Start a training run: one rank here (under torchrun / a cluster launcher), or a local group.

Under an external launcher (RANK and WORLD_SIZE set) this process is one rank. Otherwise
it starts nodes x gpus_per_node local processes on 127.0.0.1 (torch.multiprocessing), the
"nodes" simulated on one machine, and waits; if this launcher dies the ranks die with it.

    python -m robodata.train.launch CONFIG.yaml      # what `robodata train CONFIG` runs
"""

from __future__ import annotations

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
    try:  # Linux: SIGKILL this rank when the launcher goes away
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _local_rank_main(index: int, cfg: TrainConfig, port: int, started_at: float) -> None:
    _die_with_parent()
    ws = cfg.topology.world_size
    os.environ.update(RANK=str(index), WORLD_SIZE=str(ws), LOCAL_RANK=str(index % cfg.topology.gpus_per_node),
                      LOCAL_WORLD_SIZE=str(ws), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from robodata.train.loop import run_worker

    run_worker(cfg, started_at)


def _start_method(cfg: TrainConfig) -> str:
    if cfg.topology.start_method != "auto":
        return cfg.topology.start_method
    from robodata.train.mesh import resolve_device

    device, _ = resolve_device(cfg.topology)
    # fork skips re-importing torch in every rank; only safe single-threaded and without CUDA
    return "fork" if device == "cpu" and threading.active_count() == 1 else "spawn"


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run training to cfg.steps (resuming from the newest complete checkpoint) and return
    rank 0's result (also at run_dir/result.json)."""
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
    try:
        mp.start_processes(_local_rank_main, args=(cfg, _free_port(), started_at), nprocs=cfg.topology.world_size,
                           join=True, start_method=_start_method(cfg))
    except mp.ProcessRaisedException as exc:
        raise RobodataError(f"training rank {exc.error_index} failed:\n{exc}") from None
    except mp.ProcessExitedException as exc:
        raise RobodataError(f"training rank {exc.error_index} died ({exc}); rerun to resume from the newest "
                            f"complete checkpoint in {cfg.checkpoint_dir}") from None
    try:
        return json.loads(result_path.read_text())
    except (OSError, ValueError) as exc:
        raise RobodataError(f"training finished but wrote no result at {result_path}: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m robodata.train.launch CONFIG.yaml", file=sys.stderr)
        return 2
    result = train(load_config(args[0]))
    print(json.dumps({k: v for k, v in result.items() if k != "ranks"}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
