"""Message definitions a recording does not embed (ROS 2 Humble `.db3` bags, vendor packages):
a folder of `.msg` / `.idl` files registered with rosbags' type system.

Layout as in a ROS workspace: `<DIR>/.../<package>/msg/<Type>.msg` is `<package>/msg/<Type>`;
`.idl` files name their own types. Whatever lies above `<package>/` is free, so one folder can hold
**several candidate definitions of one type**, one per subfolder, e.g. a vendor message that gained
a `std_msgs/Header` between two firmware releases:

    msgs/2023-header/vicon_receiver/msg/Position.msg    std_msgs/Header header + the fields
    msgs/2020/vicon_receiver/msg/Position.msg           the fields alone

A recording then decodes by the candidate that decodes its own bytes (robodata.ingest.importers.
messages: the first messages of each topic are tried, candidates in path order); which one was
used is recorded as the episode's issue `msgdef:<type>: <file>`. Read once per process and folder.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from robodata.errors import ConfigError

MAX_COMBINATIONS = 64  # candidate choices tried for one recording at most


def msg_type_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    if len(parts) < 3 or parts[-2] != "msg":
        raise ConfigError(f"{path}: a .msg file must live at <package>/msg/<Type>.msg (names its type)")
    return f"{parts[-3]}/msg/{parts[-1]}"


@dataclass(frozen=True)
class Candidate:
    typename: str
    file: Path
    definition: Any  # rosbags' parsed definition (a Typesdict value)
    text: str  # the file's text: what other types it names


@dataclass(frozen=True)
class MsgDefs:
    """Every definition under one `--msgs` folder, by type; a type may have several candidates."""

    folder: str
    candidates: dict[str, tuple[Candidate, ...]]

    def typesdict(self, choice: dict[str, int] | None = None) -> dict:
        """One definition per type: the chosen candidate's (index per type), else the first."""
        choice = choice or {}
        return {t: c[choice.get(t, 0)].definition for t, c in self.candidates.items()}

    def ambiguous(self) -> set[str]:
        return {t for t, c in self.candidates.items() if len(c) > 1}

    def involved(self, typenames: set[str]) -> list[str]:
        """The ambiguous types a message of one of `typenames` may contain (the types themselves and
        those any of their candidates names, transitively), sorted."""
        seen: set[str] = set()
        todo = [t for t in typenames if t in self.candidates]
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            for c in self.candidates[t]:
                for other in self.candidates:
                    if other not in seen and _names(c.text, other):
                        todo.append(other)
        return sorted(seen & self.ambiguous())

    def choices(self, types: list[str]) -> list[dict[str, int]]:
        """Every combination of candidates for `types` (at most MAX_COMBINATIONS), in path order."""
        ranges = [range(len(self.candidates[t])) for t in types]
        return [
            dict(zip(types, combo, strict=True))
            for combo in itertools.islice(itertools.product(*ranges), MAX_COMBINATIONS)
        ]

    def files(self, typename: str) -> list[str]:
        return [str(c.file) for c in self.candidates.get(typename, ())]


def _names(text: str, typename: str) -> bool:
    """Whether a definition's text names `typename` (`pkg/Type` or `pkg/msg/Type`)."""
    pkg, _, name = typename.partition("/msg/")
    return re.search(rf"(?<![\w/]){re.escape(pkg)}/(msg/)?{re.escape(name)}\b", text) is not None


@lru_cache(maxsize=8)
def load_msgdefs(folder: str) -> MsgDefs:
    """Every type defined under `folder`; ConfigError naming the file that fails."""
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"--msgs {folder}: not a folder of .msg / .idl files")
    found: dict[str, list[Candidate]] = {}
    for f in sorted(root.rglob("*")):
        if f.suffix not in (".msg", ".idl") or not f.is_file():
            continue
        try:
            text = f.read_text()
            types = get_types_from_idl(text) if f.suffix == ".idl" else get_types_from_msg(text, msg_type_name(f))
        except ConfigError:
            raise
        except Exception as exc:  # rosbags' parser errors
            raise ConfigError(f"{f}: not a valid message definition ({type(exc).__name__}: {exc})") from None
        for name, definition in types.items():
            same = [c for c in found.get(name, []) if c.definition == definition]
            if not same:  # an identical copy is no second candidate
                found.setdefault(name, []).append(Candidate(name, f, definition, text))
    if not found:
        raise ConfigError(f"--msgs {folder}: holds no .msg or .idl file")
    return MsgDefs(folder, {t: tuple(c) for t, c in found.items()})
