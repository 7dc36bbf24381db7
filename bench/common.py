"""Shared benchmark plumbing: timing, peak RSS, the one-JSON-line result."""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(".bench")


def peak_rss_mb(include_children: bool = True) -> float:
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if include_children else 0
    return round(max(self_kb, kids_kb) / 1024, 1)


@contextmanager
def timer() -> Iterator[list[float]]:
    box = [0.0]
    t = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - t


def parse(description: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI-friendly)")
    return ap.parse_args()


def emit(result: dict[str, Any]) -> None:
    result.setdefault("peak_rss_mb", peak_rss_mb())
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=True))
