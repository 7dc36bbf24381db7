"""Object keys that cannot escape the site prefix.

An episode name (and, for directory episodes, each relative path inside it) comes from the
robot's disk, so it is untrusted: ``../other-site/x``, ``/etc/passwd``, ``a\\..\\b``, a NUL
byte or a control character must never turn into a key outside ``<site_prefix>/``.
"""

from __future__ import annotations

import posixpath

from robodata.errors import ConfigError, RobodataError

MAX_KEY_BYTES = 1024  # S3's limit on a key's UTF-8 length


class UnsafeKeyError(RobodataError):
    """A name would produce a key outside the site prefix, or one S3 cannot store."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason
        super().__init__(f"refusing key for {name!r}: {reason}")


def _problem(part: str) -> str | None:
    if part == "":
        return "empty name or empty path component"
    if "\x00" in part:
        return "contains a NUL byte"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in part):
        return "contains a control character"
    if "\\" in part:
        return "contains a backslash"
    if part.startswith("/"):
        return "is an absolute path"
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    for comp in part.split("/"):
        if comp in ("", ".", ".."):
            return f"has a {comp or 'empty'!r} path component"
    return None


def check_prefix(prefix: str) -> None:
    """Validate a site prefix (config time): relative, normalized, no trailing slash."""
    if not isinstance(prefix, str) or not prefix:
        raise ConfigError("site_prefix must be a non-empty string such as 'landing/site-a'")
    problem = _problem(prefix)
    if problem:
        raise ConfigError(f"site_prefix {prefix!r} {problem}")


def episode_key(site_prefix: str, name: str, relpath: str | None = None) -> str:
    """The key of an episode (a file) or of one file inside a directory episode.

    Raises UnsafeKeyError when the name or relative path is unsafe.
    """
    check_prefix(site_prefix)
    if "/" in name:
        raise UnsafeKeyError(name, "episode name contains '/'")
    for part in (name,) if relpath is None else (name, relpath):
        problem = _problem(part)
        if problem:
            raise UnsafeKeyError(part, problem)
    key = f"{site_prefix}/{name}" if relpath is None else f"{site_prefix}/{name}/{relpath}"
    # Belt and braces: the normalized key must still be under the prefix and unchanged.
    if posixpath.normpath(key) != key or not key.startswith(site_prefix + "/"):
        raise UnsafeKeyError(key, "does not normalize to a key under the site prefix")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise UnsafeKeyError(key, f"key is longer than {MAX_KEY_BYTES} bytes")
    return key
