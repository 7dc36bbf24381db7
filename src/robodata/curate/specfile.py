"""Reading a curation spec file and its exclusion file, bounded and confined.

* A spec file is at most `MAX_SPEC_BYTES`, UTF-8, YAML (JSON is YAML), parsed once by libyaml
  (`yaml.CSafeLoader`) where PyYAML has it. Before it is built, its composed nodes are checked
  iteratively: at most `MAX_DEPTH` levels of nesting and `MAX_NODES` nodes counting what aliases
  expand to, no recursive alias (so neither a deeply nested document nor an alias "billion
  laughs" can exhaust the stack or memory); every mapping key must be a string.
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
from robodata.names import MAX_NAME, NAME_PATTERN, UnsafeNameError, check_name, confine

MAX_SPEC_BYTES = 4 * 1024 * 1024
MAX_EXCLUSION_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 1_000_000
_LOADER: Any = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


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
    """The spec file's top-level mapping, after the size, encoding, depth, node and key checks.

    The text is parsed once, by libyaml where PyYAML has it (`yaml.CSafeLoader`, whose scanner
    refuses nesting past 1,000 levels): composed into nodes, checked (`check_nodes`: aliases
    counted as what they expand to), then built. The pure-Python loader's composer recurses, so
    without libyaml the event stream is checked first (`check_events`)."""
    text = read_text(path, limit=MAX_SPEC_BYTES, what="curation spec file")
    try:
        if _LOADER is yaml.SafeLoader:
            check_events(text, str(path))
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                check_nodes(node, str(path))
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own bound, met before ours is checked
            raise ConfigError(f"{path}: nested more than {MAX_DEPTH} levels deep") from exc
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    except RecursionError as exc:  # pragma: no cover - the depth is bounded first
        raise ConfigError(f"{path}: nested too deeply") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at top level, got {type(data).__name__}")
    return data


def check_nodes(root: yaml.Node, source: str) -> None:
    """ConfigError if the composed document nests deeper than MAX_DEPTH, expands to more than
    MAX_NODES values (an alias counts what it names, a shared node is sized once) or is recursive."""
    sizes: dict[int, tuple[int, int]] = {}  # node id -> (values, depth) it expands to
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        kids = _children(node)
        if not done:
            open_.add(id(node))
            stack.append((node, True))
            for kid in kids:
                if id(kid) in open_:
                    raise ConfigError(f"{source}: an alias refers to a collection that holds it (recursive)")
                if id(kid) not in sizes:
                    stack.append((kid, False))
            continue
        open_.discard(id(node))
        values = 1 + sum(sizes[id(k)][0] for k in kids)
        depth = (1 + max((sizes[id(k)][1] for k in kids), default=0)) if isinstance(node, yaml.CollectionNode) else 0
        if depth > MAX_DEPTH:
            raise ConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep")
        if values > MAX_NODES:
            raise ConfigError(f"{source}: more than {MAX_NODES} values (aliases counted as what they expand to)")
        sizes[id(node)] = (values, depth)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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


def _exclusion_path(rel: str, base_dir: Path | None, source: str) -> Path:
    field = "exclude.episode_ids_file"
    if base_dir is None:
        raise ConfigError(f"{source}: {field} {rel!r} needs a root: load the spec from its file, or pass base_dir")
    try:
        return confine(base_dir, rel, field=field, source=source)
    except UnsafeNameError as exc:
        raise ConfigError(str(exc)) from exc


def exclusion_file_key(rel: str, base_dir: Path | None, source: str) -> tuple[str, int, int, int]:
    """What identifies the version of the exclusion file `rel` (path, inode, size, mtime): the
    spec reads it again only when this changes."""
    path = _exclusion_path(rel, base_dir, source)
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise ConfigError(f"{source}: exclude.episode_ids_file not found: {path}") from exc
    except OSError as exc:
        raise ConfigError(f"{source}: exclude.episode_ids_file {path} cannot be read: {exc}") from exc
    return str(path), st.st_ino, st.st_size, st.st_mtime_ns


def exclusion_file_ids(rel: str, base_dir: Path | None, source: str) -> list[str]:
    """Episode ids listed in `exclude.episode_ids_file` `rel`, confined to `base_dir`: sorted,
    unique. The lines are checked in Polars (a 2M-line file in about a second); a line it finds
    wrong is checked again as `check_name` checks it, so the rules and the message are that one's."""
    import polars as pl

    field = "exclude.episode_ids_file"
    path = _exclusion_path(rel, base_dir, source)
    text = read_text(path, limit=MAX_EXCLUSION_BYTES, what=f"{source}: {field}")
    lines = text.splitlines()
    items = pl.Series("id", lines, dtype=pl.String).str.strip_chars()
    listed = (items != "") & ~items.str.starts_with("#")
    valid = items.str.contains(f"^{NAME_PATTERN}$") & (items.str.len_chars() <= MAX_NAME)
    extra = []
    for i in (listed & ~valid).arg_true().to_list():  # Python strips more than Polars: look again
        item = lines[i].strip()
        if item and not item.startswith("#"):
            try:
                extra.append(check_name(item, field=f"{field} line {i + 1}", source=path))
            except UnsafeNameError as exc:
                raise ConfigError(str(exc)) from exc
    ids = items.filter(listed & valid).extend(pl.Series("id", extra, dtype=pl.String))
    return ids.unique().sort().to_list()
