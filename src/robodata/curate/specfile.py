"""Reading a curation spec file and its exclusion file, bounded and confined.

* A spec file is at most `MAX_SPEC_BYTES`, UTF-8, YAML (JSON is YAML). Before it is built, its
  YAML event stream is checked iteratively: at most `MAX_DEPTH` levels of nesting and
  `MAX_NODES` nodes counting what aliases expand to (so neither a deeply nested document nor an
  alias "billion laughs" can exhaust the stack or memory); every mapping key must be a string.
* `exclude.episode_ids_file` is a path relative to the spec file's own folder (or, for a spec
  built in code, to the `base_dir` its caller names), confined there by `robodata.names.confine`
  (symlinks resolved, no absolute paths, no `..`). The file is at most `MAX_EXCLUSION_BYTES`,
  UTF-8, one episode id per line (`#` starts a comment line), each a valid name
  (`robodata.names.check_name`).

Every failure is a ConfigError naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from robodata.errors import ConfigError
from robodata.names import UnsafeNameError, check_name, confine

MAX_SPEC_BYTES = 4 * 1024 * 1024
MAX_EXCLUSION_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 1_000_000


def read_text(path: Path, *, limit: int, what: str) -> str:
    """The UTF-8 text of the file at `path` (at most `limit` bytes); ConfigError naming `what` otherwise."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ConfigError(f"{what} is not a file: {path}")
        if size > limit:
            raise ConfigError(f"{what} {path} is {size} bytes; at most {limit}")
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"{what} not found: {path}") from exc
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {exc.start}): a binary file?") from exc


def load_document(path: Path) -> dict[str, Any]:
    """The spec file's top-level mapping, after the size, encoding, depth, node and key checks."""
    text = read_text(path, limit=MAX_SPEC_BYTES, what="curation spec file")
    try:
        check_events(text, str(path))
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    except RecursionError as exc:  # pragma: no cover - check_events bounds the depth first
        raise ConfigError(f"{path}: nested too deeply") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at top level, got {type(data).__name__}")
    return data


def check_events(text: str, source: str) -> None:
    """ConfigError if the YAML in `text` nests deeper than MAX_DEPTH or expands to more than MAX_NODES."""
    depth = nodes = 0
    frames: list[list[Any]] = [[None, 0, 0, 0]]  # [anchor, nodes at start, depth at start, deepest reached]
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, depth) it expands to
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            n, d = sizes.get(event.anchor or "", (1, 0))
            nodes += n
            frames[-1][3] = max(frames[-1][3], depth + d)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            nodes += 1
            depth += 1
            frames.append([event.anchor, nodes - 1, depth - 1, depth])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, start_nodes, start_depth, deepest = frames.pop()
            depth -= 1
            frames[-1][3] = max(frames[-1][3], deepest)
            if anchor:
                sizes[anchor] = (nodes - start_nodes, deepest - start_depth)
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor:
                sizes[event.anchor] = (1, 0)
        if max(depth, frames[-1][3]) > MAX_DEPTH:
            raise ConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep")
        if nodes > MAX_NODES:
            raise ConfigError(f"{source}: more than {MAX_NODES} values (aliases counted as what they expand to)")


def check_document(data: Any, source: str) -> None:
    """ConfigError unless `data` is a mapping within MAX_DEPTH / MAX_NODES whose keys are all strings."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a curation spec is a mapping, got {type(data).__name__}")
    stack: list[tuple[Any, str, int]] = [(data, "(top level)", 1)]
    nodes = 0
    while stack:
        value, where, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH or nodes > MAX_NODES:
            raise ConfigError(f"{source}: {where} is nested too deeply or too large")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ConfigError(f"{source}: {where}: key {key!r} must be a string (quote it in YAML)")
                stack.append((item, key if depth == 1 else f"{where}.{key}", depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))


def exclusion_file_ids(rel: str, base_dir: Path | None, source: str) -> list[str]:
    """Episode ids listed in `exclude.episode_ids_file` `rel`, confined to `base_dir`."""
    field = "exclude.episode_ids_file"
    if base_dir is None:
        raise ConfigError(f"{source}: {field} {rel!r} needs a root: load the spec from its file, or pass base_dir")
    try:
        path = confine(base_dir, rel, field=field, source=source)
    except UnsafeNameError as exc:
        raise ConfigError(str(exc)) from exc
    text = read_text(path, limit=MAX_EXCLUSION_BYTES, what=f"{source}: {field}")
    ids = []
    for number, line in enumerate(text.splitlines(), start=1):
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        try:
            ids.append(check_name(item, field=f"{field} line {number}", source=path))
        except UnsafeNameError as exc:
            raise ConfigError(str(exc)) from exc
    return ids
