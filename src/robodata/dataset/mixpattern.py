"""MixPattern: a read pattern by role over a manifest that mixes corpora.

Where a ReadPattern names streams (`cam_high`, `joint_pos`), a MixPattern names roles: the `state`,
the `action` and cameras by role (`front`, `wrist`), each window at one declared rate `hz` whatever
each corpus records at. Each manifest row's streams are resolved once (`bind`): the state and action
are the row's `state_stream` / `action_stream` (robodata.container.roles, carried from the catalog);
a camera role is the row's camera whose catalog role is that role, else the first of the role's
aliases the row has (`cameras: {front: [cam_high, image, image_0, top]}`). A role a row lacks is
served as zeros with a mask (robodata.dataset.mixture), never as another stream.

Example (YAML or a dict)::

    name: mix-vla
    hz: 10
    cameras: {front: [cam_high, image, image_0, top], wrist: [cam_left_wrist, wrist_image]}
    camera: {length: 2, offset: -1}
    state: {length: 1}
    action: {length: 8}
    resize: [96, 128]
    anchor_stride_s: 0.5
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from robodata.config import from_dict, require
from robodata.dataset.pattern import ReadPattern, StreamWindow, stream_rate

ARRAY_ROLES = ("state", "action")


@dataclass(frozen=True)
class RoleWindow:
    """`length` samples at the pattern's rate, the first `offset` samples after the anchor (negative: history)."""

    length: int = 1
    offset: int = 0

    def __post_init__(self) -> None:
        require(0 <= self.length <= 10_000, f"role window length must be in [0, 10000], got {self.length}")
        require(abs(self.offset) <= 10_000, f"role window offset must be in [-10000, 10000], got {self.offset}")


@dataclass(frozen=True)
class MixPattern:
    """What one sample reads, by role, at `hz` (see the module docstring). A window of length 0 is not read."""

    name: str
    hz: float = 10.0
    cameras: dict[str, list[str]] = field(default_factory=dict)  # role -> alias stream names
    camera: RoleWindow = field(default_factory=RoleWindow)
    state: RoleWindow = field(default_factory=RoleWindow)
    action: RoleWindow = field(default_factory=RoleWindow)
    resize: tuple[int, int] | None = None  # (height, width) of every camera: required with cameras
    anchor_stride_s: float = 1.0

    def __post_init__(self) -> None:
        require(bool(self.name), "mix pattern needs a name")
        require(math.isfinite(self.hz) and 0 < self.hz <= 1000, f"mix pattern hz must be in (0, 1000], got {self.hz}")
        require(self.anchor_stride_s > 0, "mix pattern anchor_stride_s must be > 0")
        for role, aliases in self.cameras.items():
            require(bool(role) and role not in ARRAY_ROLES, f"camera role {role!r}: a non-empty name, not state/action")
            require(isinstance(aliases, list), f"camera role {role!r}: aliases must be a list of stream names")
        if self.cameras and self.camera.length:
            require(self.resize is not None, "a mix pattern with cameras needs resize: corpora differ in frame size")
        if self.resize is not None:
            object.__setattr__(self, "resize", tuple(int(x) for x in self.resize))
            ok = len(self.resize) == 2 and all(x > 0 and x % 2 == 0 for x in self.resize)
            require(ok, "mix pattern resize must be (even height, even width)")
        require(
            bool(self.cameras and self.camera.length) or self.state.length > 0 or self.action.length > 0,
            f"mix pattern {self.name!r} reads nothing",
        )

    @classmethod
    def from_dict(cls, d: dict) -> MixPattern:
        return from_dict(cls, d)

    def window(self, role: str) -> RoleWindow:
        return self.state if role == "state" else self.action if role == "action" else self.camera


@dataclass(frozen=True)
class Binding:
    """One row's streams for the pattern's roles (None: the row has none) and their native rates."""

    streams: tuple[tuple[str, str | None], ...]  # (role, stream or None), roles in pattern order
    rates: tuple[tuple[str, float], ...]  # (stream, native rate) of the bound streams

    def stream(self, role: str) -> str | None:
        return dict(self.streams).get(role)

    def why_unusable(self) -> str | None:
        """Why the row cannot serve the pattern (None when it can): it has none of its roles."""
        if not any(s for _, s in self.streams):
            return "has none of the pattern's roles (" + ", ".join(r for r, _ in self.streams) + ")"
        return None


def roles_of(pattern: MixPattern) -> list[str]:
    """The roles the pattern reads, in the order batches hold them: cameras, then state, action."""
    cams = list(pattern.cameras) if pattern.camera.length else []
    return cams + [r for r in ARRAY_ROLES if pattern.window(r).length]


def bind(
    pattern: MixPattern,
    cameras: list[str],
    camera_roles: list[str],
    state: str,
    action: str,
    rates_json: str,
) -> Binding:
    """The row's streams for the pattern's roles (see the module docstring); a stream without a
    positive rate in `rates_json` counts as absent."""
    try:
        rates = json.loads(rates_json or "{}")
    except ValueError:
        rates = {}
    rates = rates if isinstance(rates, dict) else {}
    have = {c for c in cameras if stream_rate(rates.get(c))}
    out: list[tuple[str, str | None]] = []
    for role in roles_of(pattern):
        if role in ARRAY_ROLES:
            s = state if role == "state" else action
            out.append((role, s if s and stream_rate(rates.get(s)) else None))
            continue
        by_role = [c for c, r in zip(cameras, camera_roles or [""] * len(cameras), strict=False) if r == role]
        by_alias = [a for a in pattern.cameras[role] if a in have]
        pick = next((c for c in by_role if c in have), None) or next(iter(by_alias), None)
        out.append((role, pick))
    bound = tuple((s, float(stream_rate(rates.get(s)))) for _, s in out if s)
    return Binding(tuple(out), bound)


def concrete(pattern: MixPattern, binding: Binding) -> tuple[ReadPattern, dict[str, list[int]]]:
    """The ReadPattern that reads one binding's streams, and per stream the native steps (relative to
    its window's first) that resample it to the pattern's rate: the nearest native sample to each of
    the pattern's sample times. An integer ratio reads every k-th sample; any other ratio reads the
    native samples the window spans and picks from them."""
    rates = dict(binding.rates)
    windows, picks = [], {}
    for role, stream in binding.streams:
        if stream is None:
            continue
        w = pattern.window(role)
        ratio = rates[stream] / pattern.hz
        steps = [round((w.offset + k) * ratio) for k in range(w.length)]
        m = round(ratio)
        if m >= 1 and abs(ratio - m) < 1e-6:
            kw = {"length": w.length, "every": m, "offset": w.offset * m}
            picks[stream] = list(range(w.length))
        else:
            first, last = steps[0], steps[-1]
            kw = {"length": last - first + 1, "every": 1, "offset": first}
            picks[stream] = [s - first for s in steps]
        kind = "array" if role in ARRAY_ROLES else "video"
        resize = pattern.resize if kind == "video" else None
        windows.append(StreamWindow(role, (stream,), kind, resize=resize, **kw))
    return ReadPattern(pattern.name, tuple(windows), anchor_stride_s=pattern.anchor_stride_s), picks
