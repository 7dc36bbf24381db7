"""Part of bench.dagster_paths: no process outlives the bench.

processes_left: live processes whose environment names one of the bench's instances
(`DAGSTER_HOME=...`) once the bench stopped its servers, plus those of an injected timeout: a
child process (this module) starts a daemon and a webserver the way bench.dagster_paths does
(robodata_testing.procs.spawn) and is killed with SIGKILL once they serve, as a harness does at its
timeout; they are counted when their watchdogs had time to act (WAIT_S at most).

    python -m bench.dagster_paths_procs TMP     (the child; run by injected_timeout)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from robodata_testing import procs
from robodata_testing.services import free_port

PART_OF = "dagster_paths"  # a process of bench.dagster_paths, not a bench (bench/suite.py)
REPO = Path(__file__).resolve().parents[1]
WAIT_S = procs.GRACE_S + 40.0


def _env(home: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, DAGSTER_HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


def counted(homes: list[Path], wait_s: float = 0.0) -> list[int]:
    """Pids still running with one of `homes` as DAGSTER_HOME (waiting up to `wait_s` for them to go)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [pid for h in homes for pid in procs.leftovers(f"DAGSTER_HOME={h}")]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(1.0)


def injected_timeout(tmp: Path, up_timeout_s: float = 300) -> dict[str, object]:
    """Start the child, SIGKILL its group once its servers serve, count what is left of them."""
    home = tmp / "killed_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text((REPO / "deploy" / "dagster.local.yaml").read_text())
    up = tmp / "servers_up"
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.dagster_paths_procs", str(tmp)],
        cwd=REPO,
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + up_timeout_s
    while not up.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    served = up.exists()
    before = len(counted([home]))
    os.killpg(child.pid, signal.SIGKILL)  # the harness's last resort: nothing in the child runs again
    child.wait()
    left = counted([home], WAIT_S)
    for pid in left:  # do not leave them for the machine either
        os.kill(pid, signal.SIGKILL)
    return {"injected_timeout_served": served, "injected_timeout_processes": before, "injected_left": len(left)}


def _child(tmp: Path) -> None:
    home = Path(os.environ["DAGSTER_HOME"])
    port = free_port()
    env = dict(os.environ)
    procs.spawn(["dagster-daemon", "run", "-w", "workspace.yaml"], log=tmp / "killed-daemon.log", env=env, cwd=REPO)
    web = ["dagster-webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)]
    procs.spawn(web, log=tmp / "killed-web.log", env=env, cwd=REPO)
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5):
                break
        except OSError:
            time.sleep(0.5)
    time.sleep(5)  # the daemon's threads and its code server are up too by now
    (tmp / "servers_up").write_text(str(home))
    time.sleep(3600)  # until killed


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
