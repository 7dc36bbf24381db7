"""The peer venv of bench.lerobot_peer: the real lerobot, installed as a new user would, once,
under .bench/ (never into the project's .venv: lerobot 0.4.4 pins torch < 2.11).

    python3.11 -m venv .bench/lerobot-venv
    pip install torch==2.10.0 torchvision==0.25.0      # CUDA wheels from PyPI, ~8 GB in all
    pip install lerobot==0.4.4                         # brings torchcodec 0.10 and av 15

torchcodec (LeRobot's default video backend) loads the system's FFmpeg shared libraries
(4 to 7); without them LeRobotDataset cannot decode a frame (`apt-get install ffmpeg`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench.common import BENCH_DIR

PEER_DIR = BENCH_DIR / "lerobot-venv"
STEPS = (["--upgrade", "pip"], ["torch==2.10.0", "torchvision==0.25.0"], ["lerobot==0.4.4"])
STAMP = "robodata-peer-lerobot-0.4.4"
CHECK = (
    "import lerobot, torchcodec.decoders, torch; print(lerobot.__version__ if hasattr(lerobot, '__version__') else '')"
)


class PeerVenvError(RuntimeError):
    pass


def _run(cmd: list[str], log: Callable[[str], None]) -> None:
    log(" ".join(cmd))
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise PeerVenvError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")


def ensure_peer_venv(log: Callable[[str], None] = lambda s: None) -> Path:
    """The peer venv's python, creating the venv first if needed (several minutes, once)."""
    py = PEER_DIR / "bin" / "python"
    if (PEER_DIR / STAMP).exists():
        return py
    base = shutil.which("python3.11") or sys.executable
    if not py.exists():
        _run([base, "-m", "venv", str(PEER_DIR)], log)
    for pkgs in STEPS:
        _run([str(py), "-m", "pip", "install", "-q", *pkgs], log)
    res = subprocess.run([str(py), "-c", CHECK], capture_output=True, text=True)
    if res.returncode:
        raise PeerVenvError(
            "lerobot is installed but its video backend does not load (torchcodec needs FFmpeg 4-7 shared "
            f"libraries: apt-get install ffmpeg):\n{res.stderr[-2000:]}"
        )
    (PEER_DIR / STAMP).write_text("ok\n")
    return py
