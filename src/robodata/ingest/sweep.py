"""Leftovers after kills: container objects no catalog row references, and local scratch.

A killed ingest can leave, under the root's `containers/`, whole containers uploaded before the
catalog merge that would have referenced them (S3: nothing else ever removes them unless the same
batch is re-run) and half-written files (`*.rdep.partial`, the writer's `*.partial.<pid>.<id>.tmp`
on a local root); and, in the local scratch folder (`ROBODATA_SCRATCH`), the staging folders of
`robodata.storage.objects` (`robodata-in-*`, `robodata-out-*`, holding `*.rdep.partial.*.tmp`)
and of the conversion pool (`robodata-pool-*`).

`sweep` removes them once they are older than a grace period (work in flight is younger), and
never a referenced object:

- every object under `containers/` (listed one batch folder at a time) is compared with every
  catalog row's uri (one streaming pass over the catalog's `uri` column, kept as 8-byte hashes:
  a collision can only keep an orphan, never delete a referenced object); uris compare in one
  canonical form (no scheme; local paths with their folders resolved, so a root spelled through
  a symlink still matches);
- the unreferenced ones are looked up again in the newest catalog version right before they are
  deleted (a merge that committed meanwhile keeps its containers);
- with no catalog at the root, nothing under `containers/` is deleted (a mistyped root must
  not look like a root whose every container is unreferenced).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from robodata.catalog.table import Catalog, CatalogConfig
from robodata.config import require
from robodata.ingest.tables import IngestPaths
from robodata.storage import objects

SCRATCH_PREFIXES = ("robodata-in-", "robodata-out-", "robodata-pool-")
_SCHEME = r"^[A-Za-z][A-Za-z0-9+.-]*://"


@dataclass(frozen=True)
class SweepConfig:
    """grace_s: leftovers younger than this are kept (an ingest still running writes them).
    dry_run: report what would be removed, remove nothing.
    scratch: the local scratch folder to sweep ("": ROBODATA_SCRATCH, else the system temp dir;
        None: leave scratch alone)."""

    grace_s: float = 24 * 3600.0
    dry_run: bool = False
    scratch: str | None = ""

    def __post_init__(self) -> None:
        g = self.grace_s
        require(isinstance(g, (int, float)) and not isinstance(g, bool) and g >= 0, f"grace_s must be >= 0, got {g!r}")


@dataclass
class SweepReport:
    listed: int = 0  # objects under containers/
    referenced: int = 0  # of those, referenced by a catalog row
    young: int = 0  # unreferenced but within the grace period: kept
    orphans: list[str] = field(default_factory=list)  # unreferenced and older: removed (unless dry_run)
    orphan_bytes: int = 0
    scratch: list[str] = field(default_factory=list)  # scratch folders removed (unless dry_run)
    deleted: int = 0  # objects and folders actually removed
    catalog_version: int | None = None
    dry_run: bool = False
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("orphans", "scratch")}
        return {**out, "orphans": len(self.orphans), "scratch": len(self.scratch), "examples": self.orphans[:10]}


def canonical(uris: pl.Expr) -> pl.Expr:
    """A uri without its scheme (s3://b/k -> b/k, file:///x -> /x), as fsspec lists it."""
    return uris.str.replace(_SCHEME, "")


def _resolved(path: pl.Expr, dirs: dict[str, str]) -> pl.Expr:
    """Local paths with their folder replaced by its resolved form (`dirs`)."""
    folder = path.str.extract(r"^(.*)/[^/]*$", 1)
    return folder.replace_strict(dirs, default=folder) + path.str.extract(r"(/[^/]*)$", 1)


def _hash(path: pl.Expr) -> pl.Expr:
    return path.hash(seed=0)


class Referenced:
    """The catalog's uris as 8-byte hashes of their canonical form (one streaming pass)."""

    def __init__(self, paths: IngestPaths, names: list[str] | None = None):
        cat = Catalog(CatalogConfig(uri=paths.catalog, storage_options=paths.delta_options()))
        self.exists = cat.exists()
        self.version: int | None = None
        self.hashes = pl.Series("h", [], pl.UInt64)
        self.local = not objects.is_remote(paths.containers)
        if not self.exists:
            return
        lf, self.version = cat.scan()
        uris = lf.select(canonical(pl.col("uri")).alias("u")).filter(pl.col("u").fill_null("") != "")
        if names is not None:  # only rows that could be these objects (the re-check)
            uris = uris.filter(pl.col("u").str.extract(r"([^/]*)$", 1).is_in(names))
        expr = pl.col("u")
        if self.local:
            found = uris.select(expr.str.extract(r"^(.*)/[^/]*$", 1).unique().alias("d")).collect(engine="streaming")
            expr = _resolved(expr, {d: os.path.realpath(d) for d in found["d"].drop_nulls().to_list()})
        self.hashes = uris.select(_hash(expr).alias("h")).collect(engine="streaming")["h"]

    def of(self, listed: list[str]) -> pl.Series:
        """Hashes of listed paths in the same canonical form."""
        expr = pl.col("p")
        if self.local:
            dirs = {d: os.path.realpath(d) for d in {p.rsplit("/", 1)[0] for p in listed}}
            expr = _resolved(expr, dirs)
        return pl.DataFrame({"p": listed}, schema={"p": pl.String}).select(_hash(expr)).to_series()

    def held(self, listed: list[str]) -> list[bool]:
        return self.of(listed).is_in(self.hashes.implode()).to_list()


def _folders(paths: IngestPaths) -> tuple[Any, list[str]]:
    """The containers folder's filesystem, and what to list one at a time: each batch folder
    (and the folder itself, for files directly in it)."""
    fs = objects.filesystem(paths.containers, paths.fsspec_options())
    base = fs._strip_protocol(paths.containers).rstrip("/")
    try:
        top = fs.ls(base, detail=True)
    except FileNotFoundError:
        return fs, []
    return fs, [base] + sorted(e["name"] for e in top if e.get("type") == "directory")


def _files(fs: Any, folder: str, base: str) -> dict[str, dict]:
    found = fs.ls(folder, detail=True) if folder == base else fs.find(folder, detail=True).values()
    return {e["name"]: e for e in found if e.get("type") == "file"}


def sweep_containers(paths: IngestPaths, config: SweepConfig, report: SweepReport, now: float) -> None:
    """Unreferenced objects under containers/ older than the grace period, batch folder by batch
    folder (memory: the catalog's hashes and one folder's listing)."""
    fs, folders = _folders(paths)
    if not folders:
        return
    refs = Referenced(paths)
    report.catalog_version = refs.version
    cutoff = now - config.grace_s
    old: dict[str, dict] = {}
    for folder in folders:
        files = _files(fs, folder, folders[0])
        listed = list(files)
        report.listed += len(listed)
        for path, held in zip(listed, refs.held(listed) if listed else [], strict=True):
            mtime = objects.mtime(files[path])
            if held:
                report.referenced += 1
            elif mtime is None or mtime > cutoff:
                report.young += 1
            else:
                old[path] = files[path]
    if not old:
        return
    if not refs.exists:
        report.notes.append(f"no catalog at {paths.catalog}: {len(old)} unreferenced objects kept")
        report.young += len(old)  # nothing is known to reference them, nor that nothing does
        return
    # a merge may have committed since the first pass: the candidates are looked up again
    again = Referenced(paths, sorted({p.rsplit("/", 1)[-1] for p in old}))
    report.catalog_version = again.version
    candidates = list(old)
    orphans = [p for p, held in zip(candidates, again.held(candidates), strict=True) if not held]
    report.referenced += len(candidates) - len(orphans)
    report.orphans = [uri_of(paths, p) for p in orphans]
    report.orphan_bytes = sum(int(old[p].get("size") or 0) for p in orphans)
    if not config.dry_run and orphans:
        fs.rm(orphans)
        report.deleted += len(orphans)


def uri_of(paths: IngestPaths, listed: str) -> str:
    """A listed path as a uri of the root's kind (s3://... or a local path)."""
    return f"{paths.containers.split('://', 1)[0]}://{listed}" if objects.is_remote(paths.containers) else listed


def sweep_scratch(folder: str, config: SweepConfig, report: SweepReport, now: float) -> None:
    """Staging folders of robodata's own (SCRATCH_PREFIXES) whose newest entry is past the grace
    period; nothing else in the folder is touched (it may be the system temp dir)."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    cutoff = now - config.grace_s
    for e in entries:
        if not e.name.startswith(SCRATCH_PREFIXES) or not e.is_dir(follow_symlinks=False):
            continue
        if _newest(e.path) > cutoff:
            continue
        report.scratch.append(e.path)
        if not config.dry_run:
            shutil.rmtree(e.path, ignore_errors=True)
            report.deleted += 1


def _newest(folder: str) -> float:
    newest = os.lstat(folder).st_mtime
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
            except FileNotFoundError:
                continue
    return newest


def sweep(paths: IngestPaths, config: SweepConfig | None = None, now: float | None = None) -> SweepReport:
    """Remove (or, dry-run, list) the leftovers of killed ingests older than `config.grace_s`:
    unreferenced objects under the root's containers/ and robodata's scratch folders.

    Raises:
        CatalogError: the catalog exists but cannot be read (nothing is deleted then).
    """
    config = config or SweepConfig()
    now = time.time() if now is None else now
    report = SweepReport(dry_run=config.dry_run)
    sweep_containers(paths, config, report, now)
    if config.scratch is not None:
        sweep_scratch(config.scratch or objects.scratch_dir(), config, report, now)
    return report
