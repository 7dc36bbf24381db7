"""Per-corpus normalisation statistics of a manifest: mean, std, min and max of each corpus's state and
action, per dimension, over every sample of the manifest's rows.

Computed once per manifest (one pass over each row's state and action streams, float64, merged with
Chan's parallel update so the order of rows changes nothing beyond rounding) and stored beside it as
`<manifest stem>.stats.json`, which names the manifest's content hash: a manifest's statistics are
addressed by its content, and a file whose hash is not the manifest's is recomputed, never used.

A corpus is a row's `source_dataset`, else its `robot_type`, else its `source_format`, else
"unknown" (`corpus_names`); rows of one corpus whose widths differ are merged per dimension
(`count` per dimension).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from robodata.catalog.schema import MANIFEST_META_CONTENT_HASH
from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.storage import objects

FORMAT = "robodata-normstats-1"
ROLES = {"state": "state_stream", "action": "action_stream"}
CORPUS_COLUMNS = ("source_dataset", "robot_type", "source_format")


class StatsError(RobodataError):
    """Normalisation statistics cannot be computed or read (a row's stream is unreadable)."""


def corpus_names(manifest: pa.Table) -> list[str]:
    """Each row's corpus (see the module docstring)."""
    cols = [
        manifest.column(c).to_pylist() if c in manifest.column_names else [None] * manifest.num_rows
        for c in CORPUS_COLUMNS
    ]
    return [next((v for v in vals if v), "unknown") for vals in zip(*cols, strict=True)]


def _column(manifest: pa.Table, name: str) -> list[Any]:
    """A column as a list; nulls where the manifest has no such column."""
    return manifest.column(name).to_pylist() if name in manifest.column_names else [None] * manifest.num_rows


def corpus_summary(manifest: pa.Table) -> dict[str, dict[str, Any]]:
    """Per corpus: episodes, hours, formats, robot types and the roles found (state / action streams,
    camera roles, cameras without a role): what the `manifest` asset shows of a mixture. One Polars
    pass over the columns (a manifest of millions of rows summarizes in seconds)."""
    import polars as pl

    names = set(manifest.column_names)
    text = tuple(dict.fromkeys(("source_format", "robot_type", "state_stream", "action_stream", *CORPUS_COLUMNS)))
    df = pl.from_arrow(manifest.select([c for c in {*text, "duration_s", "cameras", "camera_roles"} if c in names]))
    assert isinstance(df, pl.DataFrame)
    df = df.with_columns(
        [pl.lit(None, pl.String).alias(c) for c in text if c not in names]
        + [pl.lit(None, pl.Float64).alias("duration_s")] * ("duration_s" not in names)
        + [pl.lit(None, pl.List(pl.String)).alias(c) for c in ("cameras", "camera_roles") if c not in names]
    )
    present = [pl.when(pl.col(c).fill_null("") != "").then(pl.col(c)) for c in CORPUS_COLUMNS]
    df = df.with_columns(corpus=pl.coalesce(*present, pl.lit("unknown")))
    out: dict[str, dict[str, Any]] = {}
    per = df.group_by("corpus").agg(
        episodes=pl.len(),
        hours=pl.col("duration_s").fill_null(0.0).sum() / 3600.0,
        **{k: pl.col(c).fill_null("").unique().sort() for k, c in _LISTED.items()},
    )
    for r in per.iter_rows(named=True):
        corpus = r.pop("corpus")
        out[corpus] = r | {"hours": round(r["hours"], 4)}
    n = pl.col("cameras").list.len()
    same = pl.col("camera_roles").list.len().fill_null(0) == n
    cams = (
        df.filter(n.fill_null(0) > 0)
        .select(
            "corpus",
            "cameras",
            camera_roles=pl.when(same).then(pl.col("camera_roles")).otherwise(pl.col("cameras").list.eval(pl.lit(""))),
        )
        .explode("cameras", "camera_roles")
    )
    for corpus, role_col, name_col in (
        cams.group_by("corpus")
        .agg(
            roles=pl.col("camera_roles").filter(pl.col("camera_roles") != "").unique().sort(),
            bare=pl.col("cameras").filter(pl.col("camera_roles").fill_null("") == "").unique().sort(),
        )
        .iter_rows()
    ):
        if role_col:
            out[corpus]["camera_roles"] = role_col
        if name_col:
            out[corpus]["cameras_without_role"] = name_col
    return out


_LISTED = {
    "formats": "source_format",
    "robot_types": "robot_type",
    "state_streams": "state_stream",
    "action_streams": "action_stream",
}


class _Moments:
    """Per-dimension count, mean, M2, min, max; merged batch by batch (Chan et al.)."""

    def __init__(self) -> None:
        self.n = np.zeros(0)
        self.mean = np.zeros(0)
        self.m2 = np.zeros(0)
        self.lo = np.zeros(0)
        self.hi = np.zeros(0)

    def _grow(self, d: int) -> None:
        if d > len(self.n):
            pad = d - len(self.n)
            self.n, self.mean, self.m2 = (np.concatenate([a, np.zeros(pad)]) for a in (self.n, self.mean, self.m2))
            self.lo = np.concatenate([self.lo, np.full(pad, np.inf)])
            self.hi = np.concatenate([self.hi, np.full(pad, -np.inf)])

    def add(self, x: np.ndarray) -> None:
        if not len(x):
            return
        d = x.shape[1]
        self._grow(d)
        nb, mb = float(len(x)), x.mean(axis=0)
        m2b = ((x - mb) ** 2).sum(axis=0)
        na = self.n[:d]
        n = na + nb
        delta = mb - self.mean[:d]
        self.mean[:d] = self.mean[:d] + delta * nb / n
        self.m2[:d] = self.m2[:d] + m2b + delta**2 * na * nb / n
        self.n[:d] = n
        self.lo[:d] = np.minimum(self.lo[:d], x.min(axis=0))
        self.hi[:d] = np.maximum(self.hi[:d], x.max(axis=0))

    def to_dict(self) -> dict[str, list[float]]:
        n = np.maximum(self.n, 1)
        std = np.sqrt(self.m2 / n)
        return {
            k: v.tolist()
            for k, v in (("count", self.n), ("mean", self.mean), ("std", std), ("min", self.lo), ("max", self.hi))
        }


def compute(manifest: pa.Table, open_reader: Callable[[int], EpisodeReader] | None = None) -> dict[str, Any]:
    """{corpus: {"state"|"action": {count, mean, std, min, max}}} over the manifest's rows (population
    std; a corpus without a role's stream has no entry for it).

    Raises:
        StatsError: a row's container or stream cannot be read (names the row and the file).
    """
    corpora = corpus_names(manifest)
    uris = manifest.column("uri").to_pylist()
    streams = {
        role: manifest.column(col).to_pylist() if col in manifest.column_names else [None] * len(uris)
        for role, col in ROLES.items()
    }
    hints = [
        manifest.column(c).to_pylist() if c in manifest.column_names else [None] * len(uris)
        for c in ("footer_offset", "footer_length")
    ]
    acc: dict[str, dict[str, _Moments]] = {}
    for row, uri in enumerate(uris):
        wanted = [s for s in (streams["state"][row], streams["action"][row]) if s]
        if not uri or not wanted:
            continue
        try:
            r = (
                open_reader(row)
                if open_reader
                else EpisodeReader.open(uri, footer_offset=hints[0][row], footer_length=hints[1][row])
            )
            win = r.read_window(0.0, r.meta.duration_s + 1.0, wanted)
        except (OSError, RobodataError, KeyError) as exc:
            raise StatsError(f"manifest row {row} ({uri}): cannot read {wanted} for statistics: {exc}") from exc
        for role in ROLES:
            s = streams[role][row]
            if s:
                data = np.asarray(win[s].data, np.float64).reshape(len(win[s].t), -1)
                acc.setdefault(corpora[row], {}).setdefault(role, _Moments()).add(data)
    return {c: {role: m.to_dict() for role, m in sorted(roles.items())} for c, roles in sorted(acc.items())}


def stats_path(manifest_path: str) -> str:
    """Where a manifest's statistics live: beside it, `<stem>.stats.json`."""
    base = str(manifest_path)
    return (base[: -len(".parquet")] if base.endswith(".parquet") else base) + ".stats.json"


def load_or_compute(
    manifest_path: str, manifest: pa.Table, storage_options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The manifest's statistics: read from beside it when the file names its content hash, else
    computed (`compute`) and written there (created only if absent: racing writers write the same)."""
    digest = ((manifest.schema.metadata or {}).get(MANIFEST_META_CONTENT_HASH) or b"").decode()
    path = stats_path(manifest_path)
    try:
        doc = json.loads(objects.read_bytes(path, storage_options))
        if doc.get("format") == FORMAT and digest and doc.get("manifest_hash") == digest:
            return doc["corpora"]
    except (OSError, ValueError, AttributeError):
        pass
    corpora = compute(manifest)
    if digest:
        body = json.dumps({"format": FORMAT, "manifest_hash": digest, "corpora": corpora}, sort_keys=True).encode()
        if not objects.create(path, body, storage_options) and _stale(path, digest, storage_options):
            objects.write_bytes(path, body, storage_options)  # a file of another content: this manifest's now
    return corpora


def _stale(path: str, digest: str, storage_options: dict[str, Any] | None) -> bool:
    try:
        return json.loads(objects.read_bytes(path, storage_options)).get("manifest_hash") != digest
    except (OSError, ValueError, AttributeError):
        return True
