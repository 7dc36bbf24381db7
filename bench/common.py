"""Shared benchmark plumbing: timing, peak RSS, the one-JSON-line result."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(".bench")


def peak_rss_mb(include_children: bool = True) -> float:
    """Peak RSS in MB of this process (and of its waited-for children).

    This process's own peak is read from /proc/self/status (VmHWM) where there is one:
    getrusage's ru_maxrss survives exec on Linux, so a bench child started by a parent
    that had grown large (e.g. while generating a catalog) would report the parent's peak."""
    self_kb = _own_peak_kb()
    kids_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if include_children else 0
    return round(max(self_kb, kids_kb) / 1024, 1)


def _own_peak_kb() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@contextmanager
def timer() -> Iterator[list[float]]:
    box = [0.0]
    t = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - t


def parse(
    description: str,
    argv: list[str] | None = None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """--quick: CI-sized run that still measures what the issue asks; --smoke: tiny sizes, seconds,
    the same code path and the same JSON keys (checked in CI by tests/core/test_bench_smoke.py).
    `extra` adds a bench's own options."""
    ap = argparse.ArgumentParser(description=description)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (CI-friendly)")
    size.add_argument("--smoke", action="store_true", help="tiny sizes: seconds, same code path and JSON keys")
    if extra is not None:
        extra(ap)
    return ap.parse_args(argv)


def size_of(args: argparse.Namespace) -> str:
    """'smoke' | 'quick' | 'full'."""
    return "smoke" if getattr(args, "smoke", False) else "quick" if args.quick else "full"


def emit(result: dict[str, Any]) -> None:
    result.setdefault("peak_rss_mb", peak_rss_mb())
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=True))


def cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (user + system)."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
