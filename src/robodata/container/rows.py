"""What the container a catalog or manifest row names must be before anything is read from it.

A row's uri, size and footer hints can be edited (a manifest re-hashed by its editor). The uri
must be one a row may name (robodata.storage.location.uri_refusal: a local path, file:// or
s3://, so no row sends a request to an http:// or other server), and the container's footer must
hold the row's episode_id, so a row pointed at another episode's container is refused instead of
serving B's data as A. The loader, the exports and the viewer check both.
"""

from __future__ import annotations

from robodata.container.reader import EpisodeReader
from robodata.errors import ContainerError
from robodata.storage.location import uri_refusal


def refuse_uri(uri: str) -> None:
    """Raises ContainerError (naming the uri) unless a row may name `uri`."""
    why = uri_refusal(uri)
    if why:
        raise ContainerError(uri[:200], why)


def check_episode(reader: EpisodeReader, episode_id: str | None) -> None:
    """Raises ContainerError (and closes `reader`) unless its footer holds `episode_id` (None: no
    id to compare)."""
    if episode_id is None or reader.meta.episode_id == episode_id:
        return
    got = reader.meta.episode_id
    reader.close()
    raise ContainerError(
        str(episode_id),
        f"the row's container holds episode {got!r}: a row's uri must name its own episode's container",
        path=reader.source.name,
    )
