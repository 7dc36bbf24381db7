"""Skip-and-report for episodes that cannot serve a sample at read time.

A manifest row whose container is gone (deleted after curation), has no container (`uri` empty:
a quarantined row picked by a spec that allowed it) or cannot be read is recorded once with its
reason, warned about, and its samples in a batch are replaced by samples of other rows (the
next sample ids, deterministic), so one bad episode never fails a batch, an epoch or a manifest.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from robodata.dataset.index import Anchor, SampleIndex
from robodata.errors import ContainerError

MAX_TRIES = 64  # replacement candidates tried per sample before the batch fails


@dataclass
class SkipLog:
    """Rows skipped in this process: manifest row -> reason."""

    rows: dict[int, str] = field(default_factory=dict)

    def add(self, row: int, uri: str, exc: BaseException) -> None:
        if row in self.rows:
            return
        self.rows[row] = f"{uri or '(no container)'}: {exc}"
        warnings.warn(f"manifest row {row} cannot serve samples and is skipped: {self.rows[row]}", stacklevel=3)

    def __contains__(self, row: int) -> bool:
        return row in self.rows


def replacement(index: SampleIndex, anchor: Anchor, skipped: SkipLog, seed: int, salt: int) -> Anchor:
    """A sample of another usable row for `anchor` (whose row is skipped): the next sample ids after
    a deterministic start (`salt`), skipping rows already known to be bad.

    Raises:
        ContainerError: no usable row was found in MAX_TRIES candidates (every episode is bad).
    """
    n = len(index)
    start = (salt * 1_000_003 + int(index.cum[anchor.row - 1] if anchor.row else 0)) % max(n, 1)
    step = max(1, n // MAX_TRIES)
    for k in range(min(MAX_TRIES, n)):
        cand = index.locate((start + k * step) % n, seed)
        if cand.row not in skipped:
            return cand
    raise ContainerError("manifest", f"no episode left to serve samples ({len(skipped.rows)} rows skipped)")


def open_error(uri: str, exc: OSError) -> ContainerError:
    """A missing or unreadable container as a ContainerError naming the file."""
    return ContainerError(uri or "(no container)", f"container cannot be opened: {type(exc).__name__}: {exc}")


def fill_skipping(
    anchors: list[Anchor],
    fill: Callable[[int, list[int]], None],
    uri_of: Callable[[int], str],
    index: SampleIndex,
    skipped: SkipLog,
    seed: int,
) -> None:
    """fill(row, slots) for every row of `anchors`; a row raising ContainerError is skipped (SkipLog)
    and its slots re-filled from replacement anchors (written back into `anchors`)."""
    by_row: dict[int, list[int]] = {}
    for i, a in enumerate(anchors):
        by_row.setdefault(a.row, []).append(i)
    for round_ in range(MAX_TRIES):
        failed: list[int] = []
        for row, items in by_row.items():
            if row in skipped:
                failed += items
                continue
            try:
                fill(row, items)
            except ContainerError as exc:
                skipped.add(row, uri_of(row), exc)
                failed += items
        if not failed:
            return
        by_row = {}
        for i in failed:
            anchors[i] = replacement(index, anchors[i], skipped, seed, i + round_)
            by_row.setdefault(anchors[i].row, []).append(i)
    raise ContainerError("manifest", f"samples could not be served after {MAX_TRIES} rounds of replacements")
