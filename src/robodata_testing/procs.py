"""Servers for tests and benches (webserver, daemon, `dagster dev`, a database, a browser), each in a
process group of its own, never left behind.

    proc = spawn(["dagster-daemon", "run", "-w", "workspace.yaml"], log=path, env=env, cwd=repo)
    ...
    stop(proc)                      # its whole group: code servers and run workers too

`spawn` starts a small watchdog (`python -m robodata_testing.procs`) as the leader of a new process
group; the watchdog starts the server in that group and kills the whole group (the server's signal,
then SIGKILL after a grace period) when it is stopped, or when the process that spawned it dies,
however it died (a timeout's SIGKILL included: the watchdog sees its parent change). So a test or
bench killed at its timeout leaves no server re-parented to PID 1. `leftovers(marker)` lists the
processes whose environment holds `marker` (e.g. `DAGSTER_HOME=/tmp/x`): what a test asserts is
empty afterwards. Linux only, like the deployments.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 20.0  # from the server's signal to SIGKILL of the group
POLL_S = 0.2


def spawn(
    argv: list[str],
    *,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    stop_signal: int = signal.SIGTERM,
    grace_s: float = GRACE_S,
) -> subprocess.Popen:
    """`argv` in a new process group led by a watchdog (see the module docstring); stdout and stderr
    to `log` (appended) or discarded. The returned Popen is the watchdog: `stop` it."""
    watch = [sys.executable, "-m", "robodata_testing.procs", str(os.getpid()), str(int(stop_signal)), str(grace_s)]
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the child holds it
    try:
        return subprocess.Popen(
            [*watch, "--", *argv], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]


def stop(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """Stop `proc`'s whole group: its watchdog signals the server, then SIGKILLs the group."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s + 10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def leftovers(marker: str) -> list[int]:
    """Pids of live processes (not this one) whose environment holds `marker` (`NAME=value`)."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def _watch(parent: int, stop_signal: int, grace_s: float, argv: list[str]) -> int:
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    child = subprocess.Popen(argv)  # in this group
    deadline = None
    while True:
        rc = child.poll()
        if not stopping and os.getppid() != parent:  # whoever spawned us is gone
            stopping.append(True)
        if stopping and deadline is None:
            deadline = time.monotonic() + grace_s
            if rc is None:
                child.send_signal(stop_signal)
        if rc is not None or (deadline is not None and time.monotonic() > deadline):
            for pid in _group(os.getpgid(0)):  # what the server left in the group (and the server, late)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return rc if rc is not None else -int(signal.SIGKILL)
        time.sleep(POLL_S)


def _group(pgid: int) -> list[int]:
    """The other live processes of process group `pgid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


if __name__ == "__main__":
    _parent, _sig, _grace, _sep, *_argv = sys.argv[1:]
    sys.exit(_watch(int(_parent), int(_sig), float(_grace), _argv))
