"""Error types shared across robodata. Every error names what it is about."""

from __future__ import annotations


class RobodataError(Exception):
    """Base class for every error robodata raises on purpose."""


class ConfigError(RobodataError, ValueError):
    """A typed config failed validation before any work started."""


class ContainerError(RobodataError):
    """An episode container is corrupt, truncated or not a container at all.

    Always names the episode (id or path) and, when known, the chunk index.
    """

    def __init__(self, episode: str, message: str, chunk: int | None = None):
        self.episode = episode
        self.chunk = chunk
        where = f"episode {episode!r}" + (f", chunk {chunk}" if chunk is not None else "")
        super().__init__(f"{where}: {message}")
