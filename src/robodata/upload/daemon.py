"""Daemon and one-shot loops around the Uploader."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable

from robodata.upload.config import UploadConfig
from robodata.upload.spool import held_in
from robodata.upload.status import collect, write_status
from robodata.upload.uploader import Uploader

log = logging.getLogger("robodata.upload")


def run_daemon(cfg: UploadConfig, stop: threading.Event | None = None, max_passes: int | None = None) -> int:
    """Pass over the spool every poll_interval_s until SIGTERM/SIGINT (or `stop`); status files each pass."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    up = Uploader(cfg)
    passes = 0
    try:
        while not stop.is_set():
            outcomes = up.run_pass()
            passes += 1
            if outcomes:
                log.info("pass %d: %s", passes, outcomes)
            write_status(cfg.state_path, _status(cfg, up))
            if max_passes is not None and passes >= max_passes:
                break
            stop.wait(cfg.poll_interval_s)
    finally:
        up.close()
    return 0


def _status(cfg: UploadConfig, up: Uploader) -> dict:
    in_trash = up.trash.entries()
    return collect(up.journal, up.ready(), held_in(in_trash, cfg.held_path), in_trash)


def run_once(
    cfg: UploadConfig, on_total: Callable[[int], None] | None = None, on_bytes: Callable[[int], None] | None = None
) -> dict[str, int]:
    """One pass over what is ready now; returns outcome -> count (exit 0 only if all uploaded)."""
    up = Uploader(cfg, on_bytes=on_bytes)
    try:
        names = up.ready()
        if on_total is not None:
            from robodata.upload.spool import describe

            total = 0
            for n in names:
                with contextlib.suppress(Exception):  # process() reports it properly
                    total += describe(up.spool, n).bytes
            on_total(total)
        outcomes = up.run_pass(names)
        write_status(cfg.state_path, _status(cfg, up))
        return outcomes
    finally:
        up.close()
