"""Bounded read-ahead: run decode jobs on worker threads while the caller encodes.

JPEG / video decoders release the GIL, so decoding frame k+1..k+depth overlaps the encoder
working on frame k. Memory holds at most `depth` decoded frames.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def prefetch(jobs: Iterable[Callable[[], T]], workers: int = 2, depth: int = 8) -> Iterator[T]:
    """Yield job() results in order, keeping up to `depth` jobs in flight on `workers` threads."""
    if workers <= 0:
        for job in jobs:
            yield job()
        return
    it = iter(jobs)
    pending: deque[Future[T]] = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="ingest-decode") as pool:
        try:
            for job in it:
                pending.append(pool.submit(job))
                if len(pending) >= depth:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
