"""The one boundary for names and paths read from inputs.

Everything a recording, a dataset's metadata, a spec or a CLI argument names (episode ids,
stream / camera names, batch keys, relative paths inside a dataset) is checked here once, where
it is read, and used as a plain value afterwards. A name that fails raises `UnsafeNameError`,
which says which file and which field held it; callers that process many episodes catch it per
episode and quarantine that episode with the message as its reason.

Rules:
- a *name* (`check_name`) is one path segment: 1..`MAX_NAME` characters of `[A-Za-z0-9._-]`,
  starting with a letter or digit, so it can never be empty, `.`, `..`, hidden, absolute, or
  hold a separator, a NUL, whitespace or a control character;
- a *relative path* (`confine`, `confine_key`) is resolved against its root and must stay
  inside it: local paths after following symlinks (`Path.resolve`), object-store keys after
  POSIX normalisation (no `..` or empty segments, no leading `/`);
- a *listed path* (`within`: a file found by listing a folder) and a *tree* (`confine_tree`: a
  landing item's folder) must resolve inside their root too, so a symlink cannot lead a reader
  out of it.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from robodata.errors import RobodataError

MAX_NAME = 128
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # what check_name accepts (at most MAX_NAME characters)
_NAME = re.compile(NAME_PATTERN)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


class UnsafeNameError(RobodataError, ValueError):
    """A name or path read from an input is not safe to use; names the source and the field."""

    def __init__(self, source: str | os.PathLike[str], field: str, value: object, why: str):
        self.source = str(source)
        self.field = field
        self.value = value
        self.why = why
        super().__init__(f"{self.source}: {field} {_show(value)} {why}")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_name(value: object, *, field: str, source: str | os.PathLike[str]) -> str:
    """`value` if it is a safe single-segment name, else UnsafeNameError naming source and field."""
    if not isinstance(value, str):
        raise UnsafeNameError(source, field, value, f"must be a string, not {type(value).__name__}")
    if not value:
        raise UnsafeNameError(source, field, value, "is empty")
    if len(value) > MAX_NAME:
        raise UnsafeNameError(source, field, value, f"is {len(value)} characters long (at most {MAX_NAME})")
    if not _NAME.fullmatch(value):
        why = "may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit"
        raise UnsafeNameError(source, field, value, why)
    return value


def is_safe_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME and bool(_NAME.fullmatch(value))


def _relative_parts(rel: object, *, field: str, source: str | os.PathLike[str]) -> list[str]:
    if isinstance(rel, os.PathLike):
        rel = os.fspath(rel)
    if not isinstance(rel, str):
        raise UnsafeNameError(source, field, rel, f"must be a string path, not {type(rel).__name__}")
    if not rel or "\x00" in rel or any(ord(c) < 32 for c in rel):
        raise UnsafeNameError(source, field, rel, "is empty or holds control characters")
    if rel.startswith(("/", "\\")) or _SCHEME.match(rel) or re.match(r"^[A-Za-z]:[\\/]", rel):
        raise UnsafeNameError(source, field, rel, "must be relative to its root")
    parts = rel.replace("\\", "/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise UnsafeNameError(source, field, rel, "may not hold '.', '..' or empty path segments")
    return parts


def confine(root: str | os.PathLike[str], rel: object, *, field: str, source: str | os.PathLike[str]) -> Path:
    """root/rel for a local root, refused unless it resolves (symlinks followed) inside root."""
    parts = _relative_parts(rel, field=field, source=source)
    base = Path(root).resolve()
    target = base.joinpath(*parts).resolve()
    if not target.is_relative_to(base):
        raise UnsafeNameError(source, field, rel, f"resolves to {target}, outside {base}")
    return target


def confine_key(prefix: str, rel: object, *, field: str, source: str | os.PathLike[str]) -> str:
    """prefix/rel for an object-store prefix (s3://bucket/dir or a plain local path string)."""
    if not _SCHEME.match(prefix):
        return str(confine(prefix, rel, field=field, source=source))
    parts = _relative_parts(rel, field=field, source=source)
    joined = posixpath.join(prefix.rstrip("/"), *parts)
    return joined


def join_name(root: str | os.PathLike[str], name: str, *, field: str, source: str | os.PathLike[str]) -> Path:
    """root/name for one checked name segment (an episode id, a stream name) under a local root."""
    return confine(root, check_name(name, field=field, source=source), field=field, source=source)


def within(
    root: str | os.PathLike[str], path: str | os.PathLike[str], *, field: str, source: str | os.PathLike[str]
) -> Path:
    """`path` (found under root, e.g. by a listing) resolved, refused unless it stays inside root."""
    base = Path(root).resolve()
    target = Path(path).resolve()
    if not target.is_relative_to(base):
        raise UnsafeNameError(source, field, os.fspath(path), f"resolves to {target}, outside {base}")
    return target


def confine_tree(root: str | os.PathLike[str], *, field: str = "symlink", source: str | os.PathLike[str] = "") -> Path:
    """root resolved, refused when any symlink below it resolves outside it (one listing of the tree)."""
    base = Path(root).resolve()
    for dirpath, dirnames, filenames in os.walk(base):
        for name in (*dirnames, *filenames):
            p = Path(dirpath, name)
            if p.is_symlink():
                within(base, p, field=field, source=source or p)
    return base
