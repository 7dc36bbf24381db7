"""Work bounds per landing item, from its size: a small input may not buy unbounded decoding,
output or CPU. An item declares what it holds (frames x resolution, array sizes) before any of it
is decoded; what it declares, and later the CPU its conversion spends, is capped relative to the
item's bytes. The defaults are far above what any honest recording needs (a camera's JPEGs or
compressed raw frames decode to well under 100x their size; the cap is 4096x, with a floor so that
small items are never bounded by the ratio); an item over a bound is quarantined naming the bound
and the setting that raises it (IngestSettings.bounds)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from robodata.config import require
from robodata.ingest.raw import RawEpisode, RawEpisodeError

MB = 1 << 20


@dataclass(frozen=True)
class WorkBounds:
    decoded_per_input_byte: float = 4096.0  # declared decoded bytes (frames x H x W x 3 + arrays) per input byte
    decoded_floor_mb: float = 256.0  # an item may always declare this much, whatever its size
    cpu_s_per_input_mb: float = 30.0  # CPU seconds of opening + converting one item, per MB of input
    cpu_floor_s: float = 30.0  # an item may always spend this much CPU

    def __post_init__(self) -> None:
        require(self.decoded_per_input_byte > 0, "bounds.decoded_per_input_byte must be > 0")
        require(self.decoded_floor_mb > 0, "bounds.decoded_floor_mb must be > 0")
        require(self.cpu_s_per_input_mb > 0, "bounds.cpu_s_per_input_mb must be > 0")
        require(self.cpu_floor_s > 0, "bounds.cpu_floor_s must be > 0")

    def max_decoded(self, input_bytes: int) -> int:
        return int(max(self.decoded_floor_mb * MB, self.decoded_per_input_byte * input_bytes))

    def max_cpu_s(self, input_bytes: int) -> float:
        return max(self.cpu_floor_s, self.cpu_s_per_input_mb * input_bytes / MB)


def input_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes of a local item: a file's size, a folder's files' sizes (links not followed)."""
    p = Path(path)
    if not p.is_dir():
        return p.stat().st_size if p.exists() else 0
    total = 0
    for dirpath, _, files in os.walk(p):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def check_declared(declared: int, size: int, bounds: WorkBounds, where: str, what: str) -> None:
    """RawEpisodeError unless `declared` decoded bytes are within the bound for `size` input bytes."""
    cap = bounds.max_decoded(size)
    if declared > cap:
        raise RawEpisodeError(
            f"{where}: declares {what} = {declared / MB:,.1f} MB decoded from {size:,} bytes of input, over "
            f"the work bound bounds.decoded_per_input_byte ({bounds.decoded_per_input_byte:g} x input, at least "
            f"bounds.decoded_floor_mb {bounds.decoded_floor_mb:g} MB); raise it in IngestSettings.bounds "
            "if the recording is honest"
        )


def declared_bytes(raw: RawEpisode) -> tuple[int, str]:
    """What an episode declares it decodes to (bytes) and a phrase naming it."""
    cams = sum(len(c.t_ns) * c.height * c.width * 3 for c in raw.cameras.values())
    arrays = sum(int(a.values.nbytes) for a in raw.arrays.values())
    frames = sum(len(c.t_ns) for c in raw.cameras.values())
    return cams + arrays, f"{frames} frames x resolution + arrays"


def bounded(raw: RawEpisode, base: str, bounds: WorkBounds, started_cpu: float) -> RawEpisode:
    """The episode with its declared size checked against its input (`raw.input_bytes` where the
    importer counted what it reads, else the local item `base`'s bytes) and its frames metered: the
    CPU since `started_cpu` (time.process_time when the item was opened) may not pass the bound."""
    size = raw.input_bytes or input_bytes(base)
    declared, what = declared_bytes(raw)
    check_declared(declared, size, bounds, raw.uri, what)
    limit = bounds.max_cpu_s(size)
    frames = raw.frames
    if frames is None:
        return raw

    def metered(*args, source: Callable[..., Iterator] = frames, **kw) -> Iterator:  # frames(skip=...) too
        for n, item in enumerate(source(*args, **kw)):
            if n % 8 == 0 and time.process_time() - started_cpu > limit:
                raise RawEpisodeError(
                    f"{raw.uri}: conversion passed the work bound of {limit:.0f} CPU seconds for {size:,} bytes of "
                    f"input (bounds.cpu_s_per_input_mb {bounds.cpu_s_per_input_mb:g}, at least bounds.cpu_floor_s "
                    f"{bounds.cpu_floor_s:g}) at frame {n}; raise it in IngestSettings.bounds if the recording "
                    "is honest"
                )
            yield item

    raw.frames = metered
    return raw
