"""Lineage: which exact data and code a checkpoint was trained on.

Every checkpoint's meta.json (and the training_run materialization) carries
manifest_hash, catalog_version, spec_hash (from the manifest's Parquet key-value metadata,
written by curation), layout_version(s) of the containers in the manifest, code_version
(git sha, or the package version outside a checkout) and the sampler position.
`trained_episodes` lists the exact episodes (ids, container objects, byte ranges) behind it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robodata.catalog.schema import MANIFEST_META_CATALOG_VERSION, MANIFEST_META_CONTENT_HASH, MANIFEST_META_SPEC_HASH
from robodata.errors import RobodataError

if TYPE_CHECKING:
    import pyarrow as pa

LINEAGE_KEYS = (
    "manifest_hash",
    "catalog_version",
    "spec_hash",
    "layout_version",
    "code_version",
    "config_hash",
    "sampler_position",
)


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """`git:<sha>[-dirty]` of the checkout this code runs from, else `robodata==<version>`."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return f"git:{sha}" + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        try:
            return f"robodata=={metadata.version('robodata')}"
        except metadata.PackageNotFoundError:
            return "unknown"


def config_hash(cfg_dict: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg_dict, sort_keys=True, default=str).encode()).hexdigest()[:16]


def manifest_lineage(path: str, table: pa.Table) -> dict[str, Any]:
    """Hashes and versions recorded in a manifest's Parquet metadata, plus its layout versions, from
    the manifest as the rank read it (`table`: pq.read_table keeps the file's key-value metadata on
    its schema), so a rank reads its manifest once. `path` names it in the lineage."""
    meta = table.schema.metadata or {}
    layouts: set[str] = set()
    if "layout_version" in table.schema.names:
        layouts.update(v for v in table.column("layout_version").unique().to_pylist() if v is not None)

    def get(key: bytes) -> str | None:
        v = meta.get(key)
        return v.decode() if v is not None else None

    catalog = get(MANIFEST_META_CATALOG_VERSION)
    return {
        "source": "manifest",
        "manifest": str(path),
        "manifest_hash": get(MANIFEST_META_CONTENT_HASH),
        "catalog_version": int(catalog) if catalog is not None and catalog.lstrip("-").isdigit() else catalog,
        "spec_hash": get(MANIFEST_META_SPEC_HASH),
        "layout_version": sorted(layouts)[0] if len(layouts) == 1 else sorted(layouts),
    }


def read_checkpoint_meta(path: str | Path, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """meta.json of a checkpoint folder (or of the newest complete one under a run's checkpoints/),
    local or s3:// (options: `storage_options`, else the AWS_* variables)."""
    from robodata.storage import StorageLocation, objects
    from robodata.train.checkpoint import META, complete_checkpoints

    p = str(path).rstrip("/")
    opts = storage_options if storage_options is not None else StorageLocation.from_env(p).fsspec_options()
    if not objects.exists(f"{p}/{META}", opts):
        sub = f"{p}/checkpoints"
        found = complete_checkpoints(sub, opts) or complete_checkpoints(p, opts)
        if not found:
            raise RobodataError(f"{p} is neither a checkpoint nor a directory holding complete checkpoints")
        p = found[0]
    try:
        return json.loads(objects.read_bytes(f"{p}/{META}", opts)) | {"checkpoint": p}
    except (OSError, ValueError) as exc:
        raise RobodataError(f"checkpoint {p}: unreadable meta.json: {exc}") from exc


EPISODE_COLUMNS = ("episode_id", "split", "uri", "size_bytes", "footer_offset", "footer_length")


def trained_episodes(
    meta: dict[str, Any], storage_options: dict[str, Any] | None = None, batch_size: int = 1 << 16
) -> Iterator[dict[str, Any]]:
    """The exact episodes a checkpoint was trained on, streamed from its manifest (memory does not
    grow with the row count): the manifest rows of the training split (`data.split` of the
    checkpoint's config; every row when it is None), with the container objects' byte ranges.

    The manifest must be the one in the lineage: its content hash (Parquet metadata, written by
    curation) must equal the checkpoint's manifest_hash."""
    import fsspec
    import pyarrow.parquet as pq

    from robodata.storage import StorageLocation

    lin = meta.get("lineage") or {}
    path = lin.get("manifest")
    if not path:
        raise RobodataError(
            f"checkpoint {meta.get('checkpoint')} was not trained on a manifest (data source {lin.get('source')!r})"
        )
    split = ((meta.get("config") or {}).get("data") or {}).get("split")
    opts = storage_options if storage_options is not None else StorageLocation.from_env(path).fsspec_options()
    try:
        with fsspec.open(path, "rb", **opts) as f:
            pf = pq.ParquetFile(f)
            found = (pf.schema_arrow.metadata or {}).get(MANIFEST_META_CONTENT_HASH, b"").decode()
            want = lin.get("manifest_hash")
            if found != want:
                raise RobodataError(
                    f"manifest {path}: content hash {found or 'missing'} is not the checkpoint's {want}"
                )
            for batch in pf.iter_batches(columns=list(EPISODE_COLUMNS), batch_size=batch_size):
                for row in batch.to_pylist():
                    if split is None or row["split"] == split:
                        yield row
    except (OSError, ValueError) as exc:
        raise RobodataError(f"manifest {path!r} cannot be read: {exc}") from exc


def byte_ranges(row: dict[str, Any]) -> tuple[str, str]:
    """(`first-last` bytes of the container object, `first-last` bytes of its footer index)."""
    size, off, length = int(row["size_bytes"]), int(row["footer_offset"]), int(row["footer_length"])
    return f"0-{size - 1}", f"{off}-{off + length - 1}"
