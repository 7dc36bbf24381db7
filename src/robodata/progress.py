"""Progress of long CLI commands: a tqdm bar (rate, ETA) on a terminal, else a plain line to
stderr every `interval_s`; nothing with quiet. Library code takes a `ProgressFn` (called with
the number of items just finished) and never prints; the CLI makes one with `progress(...)`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

ProgressFn = Callable[[int], None]


class Progress:
    """What `progress` yields: call it with the items just finished; set `total` when it becomes known."""

    def __call__(self, n: int = 1) -> None:
        return None

    def set_total(self, total: int) -> None:
        return None


class _Bar(Progress):
    def __init__(self, bar: Any):
        self.bar = bar

    def __call__(self, n: int = 1) -> None:
        self.bar.update(n)

    def set_total(self, total: int) -> None:
        self.bar.total = total
        self.bar.refresh()


class _Lines(Progress):
    """Periodic plain lines: `desc: done/total unit (pct), rate unit/s, ETA s`."""

    def __init__(self, desc: str, total: int | None, unit: str, out: IO[str], interval_s: float):
        self.desc, self.total, self.unit, self.out, self.interval_s = desc, total, unit, out, interval_s
        self.done = 0
        self.t0 = self.last = time.monotonic()

    def line(self) -> str:
        el = max(time.monotonic() - self.t0, 1e-9)
        rate = self.done / el
        of = f"/{self.total}" if self.total else ""
        pct = f" ({100.0 * self.done / self.total:.0f}%)" if self.total else ""
        eta = f", ETA {(self.total - self.done) / rate:.0f} s" if self.total and rate > 0 else ""
        return f"{self.desc}: {self.done}{of} {self.unit}{pct}, {rate:.2f} {self.unit}/s, {el:.0f} s{eta}"

    def __call__(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.interval_s:
            self.last = now
            print(self.line(), file=self.out, flush=True)

    def set_total(self, total: int) -> None:
        self.total = total

    def close(self) -> None:
        print(self.line() + " (done)", file=self.out, flush=True)


@contextmanager
def progress(
    desc: str,
    total: int | None = None,
    unit: str = "items",
    *,
    quiet: bool = False,
    out: IO[str] | None = None,
    interval_s: float = 10.0,
    tty: bool | None = None,
) -> Iterator[Progress]:
    """A ProgressFn for one long command (see the module docstring).

    Args:
        desc: what is being done ("ingest", "export").
        total: how many items, when known (enables percent and ETA).
        unit: what an item is ("episodes", "chunks").
        quiet: report nothing.
        out: where to write (stderr by default).
        interval_s: seconds between plain lines when `out` is not a terminal.
        tty: force bar (True) or lines (False); None: `out.isatty()`.
    """
    if quiet:
        yield Progress()
        return
    stream = out if out is not None else sys.stderr
    is_tty = stream.isatty() if tty is None else tty
    if is_tty:
        from tqdm import tqdm

        bar: Any = tqdm(total=total, desc=desc, unit=f" {unit}", file=stream, dynamic_ncols=True)
        try:
            yield _Bar(bar)
        finally:
            bar.close()
        return
    lines = _Lines(desc, total, unit, stream, interval_s)
    try:
        yield lines
    finally:
        lines.close()
