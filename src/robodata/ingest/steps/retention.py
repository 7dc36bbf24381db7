"""Retention of superseded containers: a re-ingest that gives an episode a new container deletes
the old one only after the catalog commit that stops referencing it, never before.

Rule: before the merge, note each episode's current `uri`; after the merge has committed, an old
uri is deleted iff (1) it lies under this root's `containers/` folder, (2) no row of the catalog
at the committed version references it (looked up again, so a merge that kept the old row, e.g. a
failed re-ingest that did not demote a row with a container, keeps its container), and (3) it is
not the episode's new uri. A crash between commit and delete leaves an unreferenced container,
which the next re-ingest of that episode (or `orphans`) finds; never a row without its container.
"""

from __future__ import annotations

import polars as pl

from robodata.catalog.table import Catalog, CatalogConfig
from robodata.ingest.tables import IngestPaths
from robodata.storage import objects


def _uris(paths: IngestPaths, column: str, values: list[str]) -> pl.DataFrame:
    cat = Catalog(CatalogConfig(uri=paths.catalog, storage_options=paths.delta_options()))
    if not values or not cat.exists():
        return pl.DataFrame({"episode_id": [], "uri": []}, schema={"episode_id": pl.String, "uri": pl.String})
    lf, _ = cat.scan()
    return lf.filter(pl.col(column).is_in(values)).select("episode_id", "uri").collect()


def current_uris(paths: IngestPaths, episode_ids: list[str]) -> dict[str, str]:
    """episode_id -> its container uri in the catalog now (episodes with a container only)."""
    df = _uris(paths, "episode_id", sorted(set(episode_ids)))
    return {e: u for e, u in zip(df["episode_id"].to_list(), df["uri"].to_list(), strict=True) if u}


def delete_superseded(paths: IngestPaths, before: dict[str, str]) -> list[str]:
    """After the merge committed: delete the old containers in `before` no catalog row references
    any more (see the module docstring). Returns the deleted uris."""
    root = paths.containers.rstrip("/") + "/"
    candidates = sorted({u for u in before.values() if u.startswith(root)})
    still = set(_uris(paths, "uri", candidates)["uri"].to_list())
    deleted = []
    for uri in candidates:
        if uri in still:
            continue
        try:
            fs = objects.filesystem(uri, paths.fsspec_options())
            fs.rm(fs._strip_protocol(uri))
            deleted.append(uri)
        except FileNotFoundError:
            continue
    return deleted
