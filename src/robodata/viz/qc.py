"""QC outcomes of one episode (the batch's qc_results table) and the times they refer to.

qc_results rows carry a check, a verdict and a reason, not a time. The viewer places each at the
moment it is about: a `gaps` failure at the start of the stream's largest gap, a `joints` failure
at the stream's largest |value|, both measured while the episode is streamed (StreamMarks);
anything else at t = 0 (it is about the whole episode).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from robodata.container import EpisodeReader
from robodata.errors import RobodataError


@dataclass(frozen=True)
class QcFinding:
    stage: str  # pre | post | summary
    check: str
    passed: bool
    blocking: bool
    reason: str


@dataclass
class StreamMarks:
    """Per stream, while streaming: the largest gap between samples and the largest |value|."""

    gap: dict[str, tuple[int, int]] = field(default_factory=dict)  # stream -> (gap ns, t ns before it)
    peak: dict[str, tuple[float, int]] = field(default_factory=dict)  # stream -> (|value|, t ns)
    last: dict[str, int] = field(default_factory=dict)

    def see(self, stream: str, t_ns: np.ndarray, values: np.ndarray | None) -> None:
        if not len(t_ns):
            return
        t = np.asarray(t_ns, dtype=np.int64)
        prev = self.last.get(stream)
        full = np.concatenate([[prev], t]) if prev is not None else t
        if len(full) > 1:
            d = np.diff(full)
            i = int(np.argmax(d))
            if int(d[i]) > self.gap.get(stream, (-1, 0))[0]:
                self.gap[stream] = (int(d[i]), int(full[i]))
        self.last[stream] = int(t[-1])
        if values is not None and values.size:
            mag = np.abs(np.nan_to_num(values, nan=np.inf)).max(axis=1)
            j = int(np.argmax(mag))
            if float(mag[j]) > self.peak.get(stream, (-1.0, 0))[0]:
                self.peak[stream] = (float(mag[j]), int(t[j]))


_STREAM = re.compile(r"(?:^|; )([A-Za-z0-9_./-]+): ")


def finding_time(f: QcFinding, marks: StreamMarks) -> int:
    """ns since the episode's start that finding `f` refers to (see the module docstring)."""
    if f.passed:
        return 0
    streams = _STREAM.findall(f.reason)
    table = marks.gap if f.check == "gaps" else marks.peak if f.check == "joints" else {}
    for s in streams:
        if s in table:
            return int(table[s][1])
    return 0


def read_qc(root: str, episode_id: str) -> list[QcFinding]:
    """Every qc_results row of `episode_id` under the storage root `root` (all batches, all stages).

    Returns [] when the root has no qc_results table.

    Raises:
        RobodataError: the table exists but cannot be read.
    """
    from robodata.ingest.tables import IngestPaths, open_table

    paths = IngestPaths(root)
    try:
        dt = open_table(paths.table("qc_results"), paths.delta_options())
        if dt is None:
            return []
        t = dt.to_pyarrow_table(
            filters=[("episode_id", "=", episode_id)], columns=["stage", "check", "passed", "blocking", "reason"]
        )
    except OSError as exc:
        raise RobodataError(f"{root}: cannot read qc_results: {exc}") from exc
    order = {"pre": 0, "post": 1, "summary": 2}
    rows = sorted(t.to_pylist(), key=lambda r: order.get(r["stage"], 3))
    return [QcFinding(r["stage"], r["check"], bool(r["passed"]), bool(r["blocking"]), r["reason"] or "") for r in rows]


def locate(reader: EpisodeReader, f: QcFinding) -> float:
    """Seconds since the episode's start that a failed finding refers to, read cheaply: a gap
    from the stream's parts' index entries and one part (the one whose samples are spaced
    widest), a joint peak from that stream alone; 0 when the finding names no stream or is
    not about a time."""
    marks = StreamMarks()
    for s in _STREAM.findall(f.reason):
        spec = reader.meta.streams.get(s)
        if spec is None or f.check not in ("gaps", "joints"):
            continue
        if f.check == "gaps":
            _index_gap(reader, s, marks)
        else:
            w = reader.read_window(0, float("inf"), [s])[s]
            marks.see(
                s, (w.t * 1e9).round().astype(np.int64), w.data.reshape(len(w.t), -1) if spec.kind == "array" else None
            )
        return finding_time(f, marks) / 1e9
    return 0.0


def _index_gap(reader: EpisodeReader, s: str, marks: StreamMarks) -> None:
    """The largest gap of stream `s`: between two parts (index entries), or inside the part whose
    samples are spaced widest on average (that one part is read)."""
    parts = [(c, p) for c in reader.chunks for p in c.parts if p.stream == s]
    between = [(b.t_start - a.t_end, a.t_end) for (_, a), (_, b) in zip(parts, parts[1:], strict=False)]
    widest = max(parts, key=lambda cp: (cp[1].t_end - cp[1].t_start) / max(cp[1].count - 1, 1), default=None)
    if widest is not None:
        c, p = widest
        blob = [b for cc, _, b in reader.fetch_parts({s: (c.t_start, c.t_end)}) if cc.index == c.index]
        marks.see(s, reader.part_table(c, p, blob[0]).column("t_ns").to_numpy(), None)
    if between and max(between)[0] > marks.gap.get(s, (-1, 0))[0]:
        marks.gap[s] = max(between)
