"""Error types shared across robodata. Every error names what it is about."""

from __future__ import annotations


class RobodataError(Exception):
    """Base class for every error robodata raises on purpose."""


class ConfigError(RobodataError, ValueError):
    """A typed config failed validation before any work started."""


class ContainerError(RobodataError):
    """An episode container is corrupt, truncated, inconsistent or not a container at all, or a
    call asked the container writer/reader for something it cannot do.

    Always names the episode (id, or the path while the id is not known yet), the file when it
    differs from that name, and, when known, the chunk index.
    """

    def __init__(self, episode: str, message: str, chunk: int | None = None, path: str | None = None):
        self.episode = episode
        self.chunk = chunk
        self.path = path if path is not None else episode
        where = f"episode {episode!r}" + (f" ({path})" if path is not None and path != episode else "")
        where += f", chunk {chunk}" if chunk is not None else ""
        self.reason = message
        super().__init__(f"{where}: {message}")


class ContainerLimitError(ContainerError):
    """Opening or reading a container would take more memory than its `ReaderConfig` allows.

    The file may be intact: read a shorter window, or raise the named limit."""


class CodecError(RobodataError, ValueError):
    """Bytes do not decode as their codec says (wrong schema, truncated, inconsistent sizes)."""


class DecodeLimitError(CodecError):
    """Decoding would allocate more than the caller's decode-memory budget allows."""
