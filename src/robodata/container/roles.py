"""Stream roles: which of an episode's streams is the state, the action, and what each camera shows.

The source's declaration comes first (`meta.extra["roles"]`, written by the importers: `state`,
`action`, and `cameras: {camera stream: role}` where a key map names them); where the container
records none, a stream's own name declares it: robodata's names first, then the names public
datasets use (`state`, `actions`, ...). A camera's role is read from its name only where the name
says it (`wrist`, `front`, ...); otherwise it stays "" and a spec or a read pattern names it with an
alias map (robodata.dataset.mixture). Never guessed from values or position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# What a stream's name declares when the container records no roles (containers written before
# roles were kept, importers that declare none): robodata's own names first.
STATE_STREAMS = ("joint_pos", "state", "qpos", "observation_state")
ACTION_STREAMS = ("cmd", "action", "actions", "joint_cmd")
# A camera's role from words in its name (first match wins; "" when none).
CAMERA_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wrist", ("wrist", "hand", "gripper", "eye_in_hand")),
    ("front", ("front", "high", "top", "overhead", "agentview", "static", "scene")),
    ("left", ("left",)),
    ("right", ("right",)),
)


@dataclass(frozen=True)
class StreamRoles:
    """An episode's roles: stream names ("" when none), and each camera's role ("" when unknown)."""

    state: str = ""
    action: str = ""
    cameras: dict[str, str] = field(default_factory=dict)  # camera stream -> role

    def camera_roles(self, cameras: list[str]) -> list[str]:
        """The roles of `cameras`, in that order."""
        return [self.cameras.get(c, "") for c in cameras]


def camera_role(name: str) -> str:
    """The role a camera's name declares ("" when it declares none)."""
    words = set(re.split(r"[^a-z0-9]+", name.lower())) | {name.lower()}
    for role, names in CAMERA_WORDS:
        if words & set(names) or any(n in name.lower() for n in names if len(n) > 4):
            return role
    return ""


def stream_roles(streams: dict[str, Any], extra: dict[str, Any]) -> StreamRoles:
    """The roles of an episode's `streams` (name -> StreamSpec) from its meta.extra.

    A declared state / action that is not an array stream of the episode is not used (the
    exporters refuse such a container with their own message)."""
    declared = extra.get("roles") or {}
    arrays = [s for s, spec in streams.items() if spec.kind == "array"]
    cams = [s for s, spec in streams.items() if spec.kind == "video"]

    def pick(role: str, names: tuple[str, ...], among: list[str]) -> str:
        d = declared.get(role)
        if isinstance(d, str) and d in arrays:
            return d
        return next((s for s in names if s in among), "")

    state = pick("state", STATE_STREAMS, arrays)
    action = pick("action", ACTION_STREAMS, [a for a in arrays if a != state])
    given = declared.get("cameras")
    given = given if isinstance(given, dict) else {}
    roles = {c: str(given.get(c) or camera_role(c)) for c in cams}
    return StreamRoles(state, action, roles)
