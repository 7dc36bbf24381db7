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

The folder is confined like a landing root: a file that resolves outside it (a symlink to
/etc/passwd) is refused naming the link, a file over MAX_FILE_BYTES is refused unread, and an error
names the file and the line, never echoes its text. A definition of a type ROS 1 Noetic or ROS 2
Humble already defines is dropped when it is the standard one and refused otherwise, once, as a
ConfigError (`--msgs` adds types; changing ROS's own would fail or mis-decode every bag).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from robodata.errors import ConfigError
from robodata.names import UnsafeNameError, confine_tree

MAX_COMBINATIONS = 64  # candidate choices tried for one recording at most
MAX_FILE_BYTES = 1 << 20  # a message definition is a few KB; a bigger file is not one
MAX_LINES_LOCATED = 2000  # lines tried one at a time to name the line a parse error is on


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


def _where_unparsable(text: str, typename: str) -> str:
    """The first line of a .msg that does not parse on its own ("line N"), without its text."""
    from rosbags.typesys import get_types_from_msg

    for no, line in enumerate(text.splitlines()[:MAX_LINES_LOCATED], 1):
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                get_types_from_msg(line, typename)
            except Exception:  # rosbags' parser errors
                return f"line {no}"
    return "the file as a whole"


def _read(f: Path) -> str:
    """The text of a definition file, bounded in size."""
    size = f.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"{f}: {size} bytes, over {MAX_FILE_BYTES} (not a message definition)")
    try:
        return f.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{f}: not UTF-8 text (byte {exc.start}); a message definition is text") from None


def _parse(f: Path, text: str) -> dict:
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    typename = msg_type_name(f) if f.suffix == ".msg" else ""
    try:
        return get_types_from_idl(text) if f.suffix == ".idl" else get_types_from_msg(text, typename)
    except Exception as exc:  # rosbags' parser errors quote the whole text: never echoed
        at = _where_unparsable(text, typename) if f.suffix == ".msg" else "the file"
        raise ConfigError(f"{f}: not a valid message definition ({type(exc).__name__} at {at})") from None


def _standard(found: dict[str, list[Candidate]]) -> dict[str, list[Candidate]]:
    """`found` without the candidates that are a standard type's own definition; ConfigError for
    one that redefines a type ROS 1 Noetic and ROS 2 Humble both define otherwise (or the one that
    defines it)."""
    from rosbags.typesys import Stores, get_typestore

    stores = {"ROS 1 Noetic": Stores.ROS1_NOETIC, "ROS 2 Humble": Stores.ROS2_HUMBLE}
    fields = {label: get_typestore(s).fielddefs for label, s in stores.items()}
    out: dict[str, list[Candidate]] = {}
    for name, cands in found.items():
        have = [label for label, f in fields.items() if name in f]
        keep = []
        for c in cands:
            if not have:
                keep.append(c)
            elif not any(_same(stores[label], name, c.definition) for label in have):
                raise ConfigError(
                    f"{c.file}: redefines {name}, a standard type of {' and '.join(have)}, differently: --msgs "
                    "adds the types recordings do not carry, it cannot change ROS's own (remove the file)"
                )
        if keep:
            out[name] = keep
    return out


def _same(store: Any, name: str, definition: Any) -> bool:
    """Whether `definition` of `name` is the one `store` holds (rosbags' own comparison)."""
    from rosbags.typesys import get_typestore

    try:
        get_typestore(store).register({name: definition})
    except Exception:  # TypesysError: present with another definition
        return False
    return True


@lru_cache(maxsize=8)
def load_msgdefs(folder: str) -> MsgDefs:
    """Every type defined under `folder`; ConfigError naming the file that fails."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"--msgs {folder}: not a folder of .msg / .idl files")
    try:  # confined like a landing root: no link below it may lead outside (to a file or a folder)
        confine_tree(root, field="--msgs symlink", source=root)
    except UnsafeNameError as exc:
        link = Path(str(exc.value))
        rel = link.relative_to(root.resolve()) if link.is_relative_to(root.resolve()) else link
        raise ConfigError(f"--msgs {folder}: {rel} is a link that {exc.why} (the folder is confined)") from None
    found: dict[str, list[Candidate]] = {}
    for f in sorted(root.rglob("*")):
        if f.suffix not in (".msg", ".idl") or not f.is_file():
            continue
        text = _read(f)
        types = _parse(f, text)
        for name, definition in types.items():
            same = [c for c in found.get(name, []) if c.definition == definition]
            if not same:  # an identical copy is no second candidate
                found.setdefault(name, []).append(Candidate(name, f, definition, text))
    if not found:
        raise ConfigError(f"--msgs {folder}: holds no .msg or .idl file")
    return MsgDefs(folder, {t: tuple(c) for t, c in _standard(found).items()})
