"""Training benchmark on CPU/gloo (or GPUs when present): 2 nodes x 2 ranks, simulated locally.

1. uninterrupted hybrid-sharded (HSDP 2x2) run: goodput, data-wait fraction, optimizer bytes/rank
2. the same model replicated (4x1 mesh: every rank holds the whole optimizer state)
3. the hybrid run again, SIGKILLed mid-way (not on a checkpoint step) and resumed: steps lost,
   time lost, and whether the resumed run ends bitwise equal to run 1

    python -m bench.train --quick   # --smoke: 12 steps of a tiny model, checkpoints every 4
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import BENCH_DIR, emit, parse, size_of

ROOT = Path(__file__).resolve().parents[1]
KEYS = (
    "mesh",
    "steps",
    "optimizer_bytes_per_rank_ratio",
    "data_wait_fraction",
    "goodput",
    "steps_per_s",
    "killed_at_step",
    "resume_lost_steps",
    "checkpoint_interval",
    "goodput_with_restart",
    "resume_bitwise_equal",
    "peak_rss_mb",
)


def base_config(size: str) -> dict[str, Any]:
    """The training run's config at `size` ("smoke" | "quick" | "full")."""
    pick = {"smoke": 0, "quick": 1, "full": 2}[size]

    def by_size(*values: Any) -> Any:
        return values[pick]

    return {
        "steps": by_size(12, 32, 300),
        "global_batch_size": by_size(8, 16, 64),
        "log_every": by_size(4, 8, 50),
        "topology": {"nodes": 2, "gpus_per_node": 2},
        "data": {
            "episodes": by_size(32, 256, 4096),
            "image_size": by_size(16, 32, 64),
            "num_workers": by_size(0, 0, 2),
        },
        "model": {
            "channels": by_size([8, 8], [16, 32], [32, 64, 64]),
            "latent_dim": by_size(16, 32, 128),
            "hidden_dim": by_size(32, 64, 256),
        },
        "checkpoint": {"every_steps": by_size(4, 8, 50), "keep": 2},
    }


def start(cfg: dict, run_dir: Path) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = dict(cfg, run_dir=str(run_dir))
    path = run_dir.parent / f"{run_dir.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
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


def run(cfg: dict, run_dir: Path) -> dict:
    proc = start(cfg, run_dir)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        sys.stderr.write(out[-5000:])
        raise SystemExit(f"training run {run_dir} failed ({proc.returncode})")
    return json.loads((run_dir / "result.json").read_text())


def kill_at(cfg: dict, run_dir: Path, step: int) -> int:
    """Start a run and SIGKILL its whole process group once it has finished `step` steps."""
    proc = start(cfg, run_dir)
    beat = run_dir / "heartbeat.json"
    while proc.poll() is None:
        try:
            if json.loads(beat.read_text())["step"] >= step:
                os.killpg(proc.pid, signal.SIGKILL)
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.005)
    proc.wait()
    if proc.returncode != -signal.SIGKILL:
        raise SystemExit(f"run finished before it could be killed at step {step}")
    return int(json.loads(beat.read_text())["step"])


def params_equal(a: Path, b: Path) -> bool:
    import torch

    from robodata.train.checkpoint import load_full_tensors

    pa, pb = load_full_tensors(a), load_full_tensors(b)
    return pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)


def main() -> None:
    args = parse(__doc__ or "")
    root = BENCH_DIR / "train"
    shutil.rmtree(root, ignore_errors=True)
    cfg = base_config(size_of(args))
    interval = cfg["checkpoint"]["every_steps"]

    hybrid = run(cfg, root / "hybrid")
    replicated_cfg = copy.deepcopy(cfg)
    replicated_cfg.update(steps=4)
    replicated_cfg["topology"] = {"nodes": 4, "gpus_per_node": 1}
    replicated = run(replicated_cfg, root / "replicated")

    kill_step = interval + interval // 2 + 1  # mid-way between two checkpoints
    killed_at = kill_at(cfg, root / "resumed", kill_step)
    t = time.perf_counter()
    resumed = run(cfg, root / "resumed")
    resume_run_s = time.perf_counter() - t

    gp, rgp = hybrid["goodput"], resumed["goodput"]
    emit(
        {
            "quick": bool(args.quick),
            "size": size_of(args),
            "mesh": hybrid["mesh"],
            "steps": hybrid["step"],
            "optimizer_bytes_per_rank_hybrid": hybrid["optimizer_local_bytes_max"],
            "optimizer_bytes_per_rank_replicated": replicated["optimizer_local_bytes_max"],
            "optimizer_bytes_per_rank_ratio": round(
                hybrid["optimizer_local_bytes_max"] / replicated["optimizer_local_bytes_max"], 4
            ),
            "data_wait_fraction": gp["data_wait_fraction"],
            "loss_first_step": round(hybrid["first_loss"][1], 5),
            "loss_last_step": round(hybrid["loss"], 5),
            "goodput": gp["goodput"],
            "steps_per_s": round(hybrid["step"] / max(1e-9, gp["productive_s"] + gp["data_wait_s"]), 2),
            "checkpoint_s_total": gp["checkpoint_s"],
            "killed_at_step": killed_at,
            "resume_lost_steps": rgp["lost_steps"],
            "checkpoint_interval": interval,
            "resume_lost_s": rgp["restart_lost_s"],
            "resume_run_s": round(resume_run_s, 2),
            "goodput_with_restart": rgp["goodput"],
            "resume_bitwise_equal": params_equal(Path(hybrid["checkpoint"]), Path(resumed["checkpoint"])),
        }
    )


if __name__ == "__main__":
    main()
