"""The peer venv of bench.lerobot_peer: the real lerobot, installed as a new user would, once,
under .bench/ (never into the project's .venv: lerobot 0.6.1 needs Python >= 3.12 and pins
torch < 2.12, torchcodec < 0.12).

    python3.12 -m venv .bench/lerobot-0.6.1-venv      # python3.12 on PATH, or pyenv's
    pip install "lerobot[dataset]==0.6.1"              # its own pins: torch 2.11 (CUDA wheels from
                                                       # PyPI, ~8 GB in all), torchcodec 0.11, av

torchcodec (LeRobot's default video backend) loads the system's FFmpeg shared libraries
(4 to 7); without them LeRobotDataset cannot decode a frame (`apt-get install ffmpeg`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from bench.common import BENCH_DIR

LEROBOT = "0.6.1"
PEER_DIR = BENCH_DIR / f"lerobot-{LEROBOT}-venv"
STEPS = (["--upgrade", "pip"], [f"lerobot[dataset]=={LEROBOT}"])  # the extra brings torchcodec, datasets, av
STAMP = f"robodata-peer-lerobot-{LEROBOT}"
CHECK = "import importlib.metadata as m, torchcodec.decoders, torch; print(m.version('lerobot'))"


class PeerVenvError(RuntimeError):
    pass


def _run(cmd: list[str], log: Callable[[str], None]) -> None:
    log(" ".join(cmd))
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise PeerVenvError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")


def _runs(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import venv"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def python312() -> str:
    """A Python 3.12 (lerobot 0.6 needs >= 3.12) that runs: on PATH, else pyenv's. A pyenv shim on
    PATH fails when 3.12 is installed but not selected ("python3.12: command not found")."""
    found = shutil.which("python3.12")
    if found and _runs(found):
        return found
    pyenv = [p for p in sorted((Path.home() / ".pyenv" / "versions").glob("3.12*/bin/python3.12")) if _runs(str(p))]
    if not pyenv:
        raise PeerVenvError("lerobot 0.6.1 needs Python 3.12: none runs from PATH nor under ~/.pyenv/versions")
    return str(pyenv[-1])


def peer_version(py: Path) -> str:
    res = subprocess.run([str(py), "-c", CHECK], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else ""


def ensure_peer_venv(log: Callable[[str], None] = lambda s: None) -> Path:
    """The peer venv's python, creating the venv first if needed (several minutes, once)."""
    py = PEER_DIR / "bin" / "python"
    if (PEER_DIR / STAMP).exists():
        return py
    base = python312()
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
