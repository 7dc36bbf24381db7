"""ReadPattern: the one typed description of a training workload's reads.

The loader reads it to cut samples, the page cache and the layout advisor read it to
know which streams are read together, how far apart and how densely.

A sample is taken at an *anchor* time in an episode. Each StreamWindow says which
streams to return around the anchor: `length` samples, keeping every `every`-th native
sample (frame subsampling), starting `offset` native samples after the anchor (negative:
history). Anchors sit in slots `anchor_stride_s` apart; with `anchor_jitter` each anchor
is placed at a seeded random position inside its slot ("random positions"), otherwise on
the slot start. Anchors snap to the sample grid of the first video window, so
overlapping windows share decoded frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from robodata.config import from_dict, require
from robodata.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa

KINDS = ("video", "array")


@dataclass(frozen=True)
class StreamWindow:
    name: str  # modality key, e.g. "cameras", "state", "action"
    streams: tuple[str, ...]  # streams of that modality, e.g. the 3 cameras
    kind: str = "array"  # video | array
    length: int = 1  # samples returned per stream
    every: int = 1  # keep every k-th native sample (30 fps, every=3 -> 10 fps)
    offset: int = 0  # first sample relative to the anchor, native samples
    resize: tuple[int, int] | None = None  # video only: (height, width) of returned frames

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", tuple(self.streams))
        if self.resize is not None:
            object.__setattr__(self, "resize", tuple(int(x) for x in self.resize))
        require(bool(self.name), "stream window needs a name")
        require(len(self.streams) > 0, f"window {self.name!r}: no streams")
        require(self.kind in KINDS, f"window {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        require(self.length >= 1, f"window {self.name!r}: length must be >= 1")
        require(self.every >= 1, f"window {self.name!r}: every must be >= 1")
        if self.resize is not None:
            require(self.kind == "video", f"window {self.name!r}: resize only applies to video")
            require(
                len(self.resize) == 2 and all(x > 0 and x % 2 == 0 for x in self.resize),
                f"window {self.name!r}: resize must be (even height, even width)",
            )

    @property
    def first(self) -> int:
        return self.offset

    @property
    def last(self) -> int:
        return self.offset + (self.length - 1) * self.every

    def span_s(self, rate_hz: float) -> tuple[float, float]:
        """Window extent around the anchor in seconds: (start, end) offsets."""
        return self.first / rate_hz, self.last / rate_hz


@dataclass(frozen=True)
class ReadPattern:
    name: str
    windows: tuple[StreamWindow, ...]
    anchor_stride_s: float = 1.0
    anchor_jitter: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "windows", tuple(self.windows))
        require(bool(self.name), "read pattern needs a name")
        require(len(self.windows) > 0, f"pattern {self.name!r}: no windows")
        names = [w.name for w in self.windows]
        require(len(set(names)) == len(names), f"pattern {self.name!r}: duplicate window names {names}")
        streams = [s for w in self.windows for s in w.streams]
        require(len(set(streams)) == len(streams), f"pattern {self.name!r}: a stream is in two windows")
        require(self.anchor_stride_s > 0, f"pattern {self.name!r}: anchor_stride_s must be > 0")

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(s for w in self.windows for s in w.streams)

    @property
    def video(self) -> tuple[StreamWindow, ...]:
        return tuple(w for w in self.windows if w.kind == "video")

    @classmethod
    def from_dict(cls, d: dict) -> ReadPattern:
        return from_dict(cls, d)


CAMERAS = ("cam_left", "cam_right", "wrist")


def preset(
    name: str,
    cameras: tuple[str, ...] = CAMERAS,
    fps: float = 30.0,
    resize: tuple[int, int] | None = None,
    state_hz: float = 100.0,
    action_hz: float | None = None,
) -> ReadPattern:
    """Named workloads.

    wam: world-action model: 4 s contiguous of every camera at 10 fps (every 3rd frame of
         30 fps) + joint state and commands at the same 10 Hz; anchors every second.
    vla: vision-language-action policy: the current and previous frame of every camera,
         the current joint state, and a 50-step action chunk (0.5 s at 100 Hz); every frame
         is an anchor, and the sampler's shuffle puts them at random positions.

    Args:
        name: "wam" or "vla".
        cameras: the camera streams every sample reads.
        fps: the cameras' frame rate.
        resize: (height, width) of returned frames, or None for the stored size.
        state_hz: the rate of joint_pos (a LeRobot import has it at the camera rate).
        action_hz: the rate of cmd (None: state_hz); WAM reads both at 10 Hz whatever their rates.

    Returns:
        The ReadPattern.

    Raises:
        ConfigError: unknown name.
    """
    if name == "wam":

        def span(hz: float) -> tuple[int, int]:  # (length, every): 4 s at the step nearest 10 Hz
            every = max(1, round(hz / 10.0))
            return max(1, int(round(4.0 * hz / every))), every

        (n, sub), (n_state, sub_state) = span(fps), span(state_hz)
        n_action, sub_action = span(action_hz or state_hz)
        cams = (StreamWindow("cameras", cameras, "video", length=n, every=sub, resize=resize),) if cameras else ()
        return ReadPattern(
            "wam",
            (
                *cams,
                StreamWindow("state", ("joint_pos",), "array", length=n_state, every=sub_state),
                StreamWindow("action", ("cmd",), "array", length=n_action, every=sub_action),
            ),
            anchor_stride_s=1.0,
            anchor_jitter=False,
        )
    if name == "vla":  # without cameras (IMU, telemetry, state-only recordings): every state sample an anchor
        cams = (
            (StreamWindow("cameras", cameras, "video", length=2, every=1, offset=-1, resize=resize),) if cameras else ()
        )
        return ReadPattern(
            "vla",
            (
                *cams,
                StreamWindow("state", ("joint_pos",), "array", length=1),
                StreamWindow("action", ("cmd",), "array", length=50),
            ),
            anchor_stride_s=1.0 / (fps if cameras else state_hz),
            anchor_jitter=False,
        )
    raise ConfigError(f"unknown read pattern preset {name!r}; known: ['vla', 'wam']")


def preset_for(manifest: pa.Table, name: str) -> ReadPattern:
    """Preset `name` over the camera set most of the manifest's episodes have, at the stream rates
    most of those have (ties: the first in manifest order); see `preset`.

    A fleet mixes camera sets: episodes without one of the chosen cameras are skipped and
    reported by the index (robodata.dataset.index), so the choice serves the most episodes
    of one set, never only the first row's.

    A manifest that mixes corpora (robodata.dataset.normstats.corpus_names: several
    `source_dataset`s, else robot types) whose camera names or state / action streams differ is
    refused: a preset reads one set of names, so the other corpora's rows would give no samples.
    Such a manifest is read by role (robodata.dataset.mixpattern.MixPattern, MixedDataset).

    Raises:
        ConfigError: an empty manifest, a manifest mixing corpora with different streams, or an
            unknown preset name. Most episodes without a camera: the preset's state and action
            windows only (a state-only pattern).
    """
    import polars as pl

    from robodata.catalog.schema import stream_rates

    if manifest.num_rows == 0:
        raise ConfigError("manifest has no rows; cannot lay a read pattern over it")
    _refuse_mixed(manifest)
    frame = pl.from_arrow(manifest.select(["cameras", "stream_rates_json"]))
    assert isinstance(frame, pl.DataFrame)
    combos = frame.group_by("cameras", "stream_rates_json", maintain_order=True).len().rows()  # few
    per_set: dict[tuple[str, ...], int] = {}
    for cameras, _, n in combos:  # in first-appearance order: max() keeps the first of equals
        per_set[tuple(cameras or ())] = per_set.get(tuple(cameras or ()), 0) + n
    cams = max(per_set, key=lambda k: per_set[k])  # () when most episodes have no camera: a state-only preset
    if not all(isinstance(c, str) and c for c in cams):
        raise ConfigError(f"manifest column 'cameras' holds {list(cams)!r}: camera names must be non-empty strings")
    rates = {}
    for _, raw, _ in sorted((c for c in combos if tuple(c[0] or ()) == cams), key=lambda c: -c[2]):
        try:  # the most common valid rates: rows whose rates do not parse are skipped by the index
            rates = stream_rates(raw)
            break
        except ValueError:
            continue
    fps = (stream_rate(rates.get(cams[0])) if cams else 0.0) or 30.0
    state_hz = stream_rate(rates.get("joint_pos")) or stream_rate(rates.get("cmd")) or 100.0
    action_hz = stream_rate(rates.get("cmd")) or state_hz
    return preset(name, cameras=cams, fps=fps, state_hz=state_hz, action_hz=action_hz)


def _refuse_mixed(manifest: pa.Table) -> None:
    """ConfigError naming each corpus's streams when the manifest's corpora read differently."""
    if not {"source_dataset", "robot_type"} & set(manifest.column_names):
        return  # a manifest without the mixing facts (scheme < v4, or a hand-made table): one fleet
    import polars as pl

    from robodata.dataset.normstats import CORPUS_COLUMNS, corpus_names

    cols = [c for c in (*CORPUS_COLUMNS, *_STREAM_COLUMNS) if c in manifest.column_names]
    combos = pl.from_arrow(manifest.select(cols)).unique(maintain_order=True).to_arrow()  # a few rows
    get = {c: combos.column(c).to_pylist() if c in cols else [None] * combos.num_rows for c in _STREAM_COLUMNS}
    per: dict[str, set[str]] = {}
    for corpus, cams, state, action in zip(corpus_names(combos), *get.values(), strict=True):
        per.setdefault(corpus, set()).add(f"{','.join(cams or []) or 'no camera'}; {state or '?'}/{action or '?'}")
    if len(per) < 2 or len({frozenset(v) for v in per.values()}) < 2:
        return
    shown = "; ".join(f"{c}: {' | '.join(sorted(v))}" for c, v in sorted(per.items())[:6])
    raise ConfigError(
        f"the manifest mixes {len(per)} corpora whose cameras or state/action streams differ ({shown}): a preset "
        "reads one set of stream names and would give the other corpora's rows no samples; read it by role "
        "with robodata.dataset.MixPattern and MixedDataset (docs/delivery.md, training on a mixture of corpora)"
    )


_STREAM_COLUMNS = ("cameras", "state_stream", "action_stream")


def stream_rate(value: object) -> float:
    """A stream rate from stream_rates_json: a finite positive number, else 0.0 (no such stream;
    `preset_for` then takes the preset's default, and robodata.dataset.index skips the episodes)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0
