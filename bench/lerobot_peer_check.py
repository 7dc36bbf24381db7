"""bench.lerobot_peer's agreement checks: the same samples from LeRobotDataset and PatternDataset
(frames by PSNR, state/action by max abs difference, the frame index each picked), and our
LeRobot export loaded by LeRobot itself."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

STATE, ACTION = ("observation.state", "joint_pos"), ("action", "cmd")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if mse == 0 else 10 * np.log10(255.0**2 / mse)


def run_json(cmd: list[str], log: Callable[[str], None], cwd: str | None = None) -> dict:
    """Run one side's command; its last stdout line is its JSON result."""
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if res.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({res.returncode}):\n{res.stderr[-4000:]}")
    lines = [x for x in res.stdout.splitlines() if x.strip()]
    if not lines:
        raise RuntimeError(f"{' '.join(cmd[:4])} printed nothing; stderr:\n{res.stderr[-2000:]}")
    return json.loads(lines[-1])


def compare(
    lerobot_npz: Path, ours_npz: Path, n: int, cams: list[str], lerobot_first: bool = True, keep: bool = False
) -> dict:
    """Sample by sample: LeRobot's `observation.images.<cam>` vs our `<cam>` frames (uint8 HWC),
    observation.state/action vs joint_pos/cmd, and the frame indices each side picked.
    lerobot_first=False: both files are ours (an import of an export against the original).
    keep: also return every frame's PSNR (`psnrs`), to pool with other comparisons."""
    lr, us = np.load(lerobot_npz), np.load(ours_npz)
    cam_key = (lambda c: f"observation.images.{c}") if lerobot_first else (lambda c: c)
    st, ac = (STATE[0], ACTION[0]) if lerobot_first else (STATE[1], ACTION[1])
    psnrs: list[float] = []
    state_d, action_d, mismatches, frames = 0.0, 0.0, 0, 0
    for i in range(n):
        for c in cams:
            a, b = lr[f"{i}/{cam_key(c)}"], us[f"{i}/{c}"]
            if a.shape != b.shape:
                raise AssertionError(f"sample {i} {c}: shapes {a.shape} (lerobot) vs {b.shape} (robodata)")
            psnrs.extend(psnr(x, y) for x, y in zip(a, b, strict=True))
        fl, fo = lr[f"{i}/frame_index"], us[f"{i}/frame_index"]
        mismatches += int(np.sum(fl != fo))
        frames += fl.size
        state_d = max(state_d, float(np.max(np.abs(lr[f"{i}/{st}"] - us[f"{i}/{STATE[1]}"]))))
        action_d = max(action_d, float(np.max(np.abs(lr[f"{i}/{ac}"] - us[f"{i}/{ACTION[1]}"]))))
    out: dict = {
        "samples": n,
        "frames_compared": len(psnrs),
        "psnr_db_min": round(min(psnrs), 2),
        "psnr_db_p1": round(float(np.percentile(psnrs, 1)), 2),
        "psnr_db_median": round(float(np.median(psnrs)), 2),
        "psnr_db_mean": round(float(np.mean(psnrs)), 2),
        "state_max_abs_diff": state_d,
        "action_max_abs_diff": action_d,
        "frame_index_mismatches": mismatches,
        "frame_indices_compared": frames,
    }
    if keep:
        out["psnrs"] = psnrs
    return out


def export_dataset(manifest: Path, out: Path, log: Callable[[str], None]) -> Path:
    """`robodata export --format lerobot MANIFEST DIR`, as a user runs it."""
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    cli = Path(sys.executable).parent / "robodata"
    cmd = [str(cli)] if cli.exists() else [sys.executable, "-m", "robodata.cli"]
    res = subprocess.run(
        [*cmd, "export", "--format", "lerobot", str(manifest), str(out)], capture_output=True, text=True
    )
    if res.returncode:
        raise RuntimeError(f"robodata export failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}")
    log(f"exported {manifest.name} -> {out}")
    return out


def episode_from_index(root: Path) -> dict[int, int]:
    """LeRobot v3.0: each episode's first global frame index (meta/episodes/*/*.parquet)."""
    import pyarrow.parquet as pq

    out: dict[int, int] = {}
    for f in sorted((root / "meta" / "episodes").glob("*/*.parquet")):
        t = pq.read_table(f, columns=["episode_index", "dataset_from_index"])
        out.update(zip(t.column("episode_index").to_pylist(), t.column("dataset_from_index").to_pylist(), strict=True))
    return out


def agreement(
    work: Path, peer_py: Path, side_py: str, v3: Path, specs, manifests, lays, cams, n_agree: int, log
) -> dict:
    """Per pattern and layout in `lays`: the agreement samples from LeRobot (its items of `v3`) and
    from us (PatternDataset over that layout's manifest), compared (`compare`, with every frame's
    PSNR); items already written are reused (a rerun over the same data)."""
    agree: dict = {}
    for name in ("vla", "wam"):
        a_lr = work / f"{name}_agree_lerobot.npz"
        a_lr.exists() or run_json(  # the items of a set already written are the same (a rerun reuses them)
            [
                str(peer_py),
                side_py,
                "items",
                "--root",
                str(v3),
                "--spec",
                str(specs[name]["agree"]),
                "--out",
                str(a_lr),
            ],
            log,
        )
        for lay in lays:
            a_us = work / f"{name}_agree_ours_{lay}.npz"
            a_us.exists() or run_json(
                [sys.executable, "-m", "bench.lerobot_peer_ours", "items", "--manifest", str(manifests[lay][name])]
                + ["--spec", str(specs[name]["agree"]), "--out", str(a_us)],
                log,
            )
            agree[(name, lay)] = compare(a_lr, a_us, n_agree, list(cams), keep=True)
            log(f"{name} {lay} agreement { {k: v for k, v in agree[(name, lay)].items() if k != 'psnrs'} }")
    return agree
