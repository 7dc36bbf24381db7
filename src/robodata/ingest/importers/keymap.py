"""Key maps: where a step-array layout (HDF5, Zarr, RLDS) keeps each stream, declared not coded.

A key map names, relative to one episode's group, which keys are cameras and which are arrays
(stream name -> key), the control rate and the language key. Built in: ALOHA/ACT
(`episode_N.hdf5`), robomimic/LIBERO (`data/demo_N`), diffusion_policy/UMI Zarr replay
buffers and RLDS (Open X-Embodiment) steps. Other labs' layouts come from a YAML file
(`robodata ingest --key-map FILE.yaml`, docs/ingestion.md): a list of maps, each
`{name, format, match, fps, cameras, arrays, language, robot_type, camera_roles}`; the first whose `match`
regex finds the item's name (and whose format is the item's) wins, before the built-ins.
Keys may hold `*` (one path segment): `observations/images/*` makes one camera per key.
`camera_roles: {image_0: front, image_1: wrist}` declares what a camera shows (by its stream name);
the catalog row's `camera_roles` carry it, so a spec or a read pattern asks for the role.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from robodata.config import load_yaml_list, require
from robodata.errors import ConfigError
from robodata.ingest import format_kinds

FORMATS = format_kinds.KEY_MAPPED  # a map's `format`: hdf5 | zarr | rlds


@dataclass(frozen=True)
class KeyMap:
    name: str
    format: str  # hdf5 | zarr | rlds
    match: str = ".*"  # regex searched in the item name
    fps: float = 0.0  # control rate; 0 -> the file's own (an attribute), else unknown (a nominal 10 Hz, flagged)
    cameras: dict[str, str] = field(default_factory=dict)  # stream -> key ("*" in both: one per key)
    arrays: dict[str, str] = field(default_factory=dict)  # stream -> key
    language: str = ""  # key (or attribute) holding the instruction text
    robot_type: str = ""
    image_keys: str = ""  # regex: other keys holding images become cameras named by their last segment
    other_arrays: bool = False  # numeric keys no rule names become arrays named by their last segment
    required: tuple[str, ...] = ()  # keys an episode must hold (else quarantined naming the key)
    units: dict[str, str] = field(default_factory=dict)  # stream -> units ("rad": joints_in_range checks it)
    # camera stream -> its role (`front`, `wrist`, ...): the catalog's camera_roles (robodata.container.roles)
    camera_roles: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(self.format in FORMATS, f"key map {self.name!r}: format must be one of {FORMATS}")
        require(self.fps >= 0, f"key map {self.name!r}: fps must be >= 0")
        for what, pattern in (("match", self.match), ("image_keys", self.image_keys)):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"key map {self.name!r}: {what} {pattern!r} is not a regex ({exc})") from None
        require(bool(self.cameras or self.arrays or self.other_arrays), f"key map {self.name!r}: names no stream")
        for stream, role in self.camera_roles.items():
            ok = (
                isinstance(role, str) and 0 < len(role) <= 64 and role.isprintable() and role not in ("state", "action")
            )
            require(
                ok, f"key map {self.name!r}: camera_roles.{stream}: a role name of 1..64 characters, not state/action"
            )

    def roles_of(self, cameras: dict[str, str]) -> dict[str, str]:
        """The declared roles of this episode's camera streams (those `camera_roles` names)."""
        return {s: r for s, r in self.camera_roles.items() if s in cameras}

    def applies(self, fmt: str, item: str) -> bool:
        return self.format == fmt and re.search(self.match, item) is not None


ALOHA = KeyMap(
    "aloha",
    format_kinds.HDF5,
    r"episode_\d+",
    fps=50.0,
    cameras={"*": "observations/images/*"},
    arrays={
        "joint_pos": "observations/qpos",
        "joint_vel": "observations/qvel",
        "joint_cur": "observations/effort",
        "cmd": "action",
    },
    robot_type="aloha",
    required=("observations/qpos", "action"),
    units={"joint_pos": "rad", "joint_vel": "rad/s"},  # ACT / ALOHA qpos: joint angles (gripper normalized)
)
ROBOMIMIC = KeyMap(
    "robomimic",
    format_kinds.HDF5,
    r".*",
    fps=20.0,
    arrays={"cmd": "actions", "joint_pos": "obs/robot0_joint_pos"},
    image_keys=r"^obs/.*(image|rgb)$",
    other_arrays=True,
    language="problem_info.language_instruction",
    required=("actions",),
    units={"joint_pos": "rad"},  # robosuite's robot0_joint_pos
)
UMI_ZARR = KeyMap(
    "diffusion_policy",
    format_kinds.ZARR,
    fps=10.0,
    arrays={"cmd": "action", "joint_pos": "state"},
    image_keys=r"(^|_)(img|image|rgb)$",
    other_arrays=True,
    required=("action",),
)
RLDS = KeyMap(
    "rlds",
    format_kinds.RLDS,
    fps=0.0,  # OXE datasets run at 3-30 Hz and TFDS records none: unknown unless a map declares it
    arrays={"joint_pos": "observation/state", "cmd": "action"},
    image_keys=r"^observation/.*(image|rgb).*$",
    other_arrays=True,
    language="language_instruction",
    required=("action",),
)
BUILT_IN = (ALOHA, ROBOMIMIC, UMI_ZARR, RLDS)


@lru_cache(maxsize=8)
def load_key_maps(path: str) -> tuple[KeyMap, ...]:
    """Key maps from a YAML file (a list, or {maps: [...]}); ConfigError naming the file and map."""
    return load_yaml_list(KeyMap, path, "--key-map", "maps")


def choose(fmt: str, item: str, file: str = "") -> KeyMap:
    """The declared map (from `file`) or the built-in one for an item of format `fmt`."""
    for m in (load_key_maps(file) if file else ()) + BUILT_IN:
        if m.applies(fmt, item):
            return m
    raise ConfigError(f"{item}: no key map for format {fmt!r}")


def expand(pattern: str, keys: list[str]) -> dict[str, str]:
    """`a/*` against the available keys -> {segment: key}; a plain key -> {"": key} if present."""
    if "*" not in pattern:
        return {"": pattern} if pattern in keys else {}
    rx = re.compile("^" + re.escape(pattern).replace(r"\*", "([^/]+)") + "$")
    return {m.group(1): k for k in keys if (m := rx.match(k))}
