"""Idempotent landing: identity of a landing item by the digest of its content, not path + mtime.

`item_digest` hashes what an item is made of (an MCAP file's bytes; every file of a JPEG folder,
rosbag2 folder or LeRobot dataset, by relative path, plus the episode index for LeRobot items).
Ingestion records it on the catalog row (`source_digest`); `not_cataloged` splits a list of
landing items into those whose content the catalog does not hold yet and those it does, so a
sensor that lost its cursor (or never had one, e.g. after `make demo`) re-ingests nothing that is
unchanged. One call per tick: `fresh, known = not_cataloged(items, catalog_uri)`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from robodata.catalog.table import Catalog, CatalogConfig
from robodata.ingest import formats
from robodata.ingest.landing.item import LandingItem
from robodata.storage import StorageLocation, objects

CHUNK = 4 * 1024 * 1024
SCHEME = "sha256-v1"


def _hash_file(fs, path: str, h) -> None:
    with fs.open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)


def item_digest(uri: str, kind: str, storage_options: dict | None = None, memo: dict[str, str] | None = None) -> str:
    """`sha256-v1:<hex>` of the item's content (see the module docstring).

    An item of a file or store that holds many episodes (LeRobot datasets, HDF5 files, Zarr buffers,
    RLDS folders: `<base>#<episode>`) is the content of its base plus its episode index; `memo`
    (base -> content hash, kept by the caller for one listing) reads each base once for all of them.

    Raises:
        OSError: the item cannot be read.
    """
    fmt = formats.of(kind)
    base, _, index = fmt.split(uri) if fmt is not None else (uri, "", "")
    content = memo.get(base) if memo is not None else None
    if content is None:
        content = _content_hash(base, storage_options)
        if memo is not None:
            memo[base] = content
    h = hashlib.sha256(f"{SCHEME}\0{kind.split('-')[0]}\0{index}\0{content}".encode())
    return f"{SCHEME}:{h.hexdigest()}"


def _content_hash(base: str, storage_options: dict | None) -> str:
    if storage_options is None and objects.is_remote(base):
        storage_options = StorageLocation.from_env(base).fsspec_options()
    fs = objects.filesystem(base, storage_options)
    root = fs._strip_protocol(base).rstrip("/")
    h = hashlib.sha256()
    if not objects.is_remote(base):
        _hash_local(Path(root), h)
    elif fs.isdir(root):
        for path in sorted(fs.find(root)):
            h.update(path[len(root) :].encode() + b"\0")
            _hash_file(fs, path, h)
    else:
        _hash_file(fs, root, h)
    return h.hexdigest()


def _hash_local(root: Path, h) -> None:
    """A local item, never following a symlink (one may point out of the landing zone: a link is
    hashed by its target's name, never read)."""
    if root.is_symlink():
        raise OSError(f"{root}: a symlink; not read for its digest")
    if not root.is_dir():
        with open(root, "rb") as f:
            while block := f.read(CHUNK):
                h.update(block)
        return
    for dirpath, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if Path(dirpath, d).is_symlink()]):
            p = Path(dirpath, name)
            h.update(str(p.relative_to(root)).encode() + b"\0")
            if p.is_symlink():
                h.update(b"link:" + os.readlink(p).encode())
                continue
            with open(p, "rb") as f:
                while block := f.read(CHUNK):
                    h.update(block)


@dataclass(frozen=True)
class Dedup:
    fresh: list[LandingItem]  # content not in the catalog: ingest these
    known: list[tuple[LandingItem, str]]  # (item, episode_id of the catalog row holding its content)
    digests: dict[str, str]  # uri -> digest of every item looked at (unreadable items: absent)


def not_cataloged(items: Iterable[LandingItem], catalog: str | Catalog, storage_options: dict | None = None) -> Dedup:
    """Split landing items into those whose content is not cataloged yet and those it is.

    An item that cannot be read stays fresh (ingestion records why it fails). A catalog that does
    not exist yet, or predates `source_digest`, holds no content: every item is fresh.
    """
    items = list(items)
    digests: dict[str, str] = {}
    memo: dict[str, str] = {}  # one read of a dataset / file / store for all its episodes
    for it in items:
        if formats.of(it.kind) is None:  # unrecognized: no content to compare
            continue
        try:
            digests[it.uri] = item_digest(it.uri, it.kind, storage_options, memo)
        except OSError:
            continue
    cat = catalog if isinstance(catalog, Catalog) else Catalog(CatalogConfig(uri=catalog))
    held: dict[str, str] = {}
    if digests and cat.exists():
        lf, _ = cat.scan()
        if "source_digest" in lf.collect_schema().names():
            df = (
                lf.filter(pl.col("source_digest").is_in(sorted(set(digests.values()))))
                .select("source_digest", "episode_id")
                .collect()
            )
            held = dict(zip(df["source_digest"].to_list(), df["episode_id"].to_list(), strict=True))
    fresh = [it for it in items if digests.get(it.uri) not in held]
    known = [(it, held[digests[it.uri]]) for it in items if digests.get(it.uri) in held]
    return Dedup(fresh, known, digests)
