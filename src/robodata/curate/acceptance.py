"""Site acceptance: evaluate new episodes against per-site criteria; keep per robot/shift yield.

Config (YAML)::

    version: 1
    default: {criteria: {min_quality: 0.9, require_success: true}, target_passes_per_shift: 30}
    sites:
      sfo-1:
        timezone: America/Los_Angeles
        shifts: [{name: A, start: "06:00"}, {name: B, start: "14:00"}, {name: C, start: "22:00"}]
        criteria: {min_quality: 0.92, require_success: true, require_qc_pass: true}
        target_passes_per_shift: 40

An episode passes when it meets every criterion of its site. It belongs to the shift
whose start (site-local time) is the latest at or before its start time; times before
the first shift of a day belong to the previous day's last shift.

"New episodes" are found from the Delta log: the days whose files changed since the
catalog version recorded by the previous evaluation. Those days are re-evaluated in
full and merged into the yield table keyed by (site, robot, shift_start), so the work
follows what changed, re-running is idempotent, and late-arriving episodes of an old
day correct that day's yield.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, timedelta

import polars as pl
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from robodata.catalog.table import Catalog
from robodata.config import load_yaml, require
from robodata.errors import ConfigError, RobodataError
from robodata.storage import StorageLocation, objects

ACCEPTANCE_VERSION = 1
META_KEY = "robodata.acceptance.catalog_version"
YIELD_SCHEMA = pa.schema(
    [
        ("site", pa.string()),
        ("robot", pa.string()),
        ("shift", pa.string()),
        ("shift_date", pa.string()),
        ("shift_start", pa.timestamp("us", tz="UTC")),
        ("day", pa.string()),
        ("episodes", pa.int64()),
        ("passes", pa.int64()),
        ("yield_frac", pa.float64()),
        ("target_passes", pa.int64()),
        ("meets_target", pa.bool_()),
    ]
)


@dataclass
class Shift:
    name: str
    start: str  # "HH:MM" site-local

    def __post_init__(self) -> None:
        hh, _, mm = self.start.partition(":")
        require(
            hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60,
            f"shift {self.name!r}: start must be HH:MM, got {self.start!r}",
        )

    @property
    def minutes(self) -> int:
        hh, _, mm = self.start.partition(":")
        return int(hh) * 60 + int(mm)


@dataclass
class Criteria:
    min_quality: float = 0.9
    require_success: bool = True
    require_qc_pass: bool = True
    min_duration_s: float = 0.0

    def __post_init__(self) -> None:
        require(0.0 <= self.min_quality <= 1.0, f"min_quality must be in [0, 1], got {self.min_quality}")


def _default_shifts() -> list[Shift]:
    return [Shift("day", "06:00"), Shift("swing", "14:00"), Shift("night", "22:00")]


@dataclass
class SiteAcceptance:
    criteria: Criteria = field(default_factory=Criteria)
    target_passes_per_shift: int = 30
    timezone: str = "UTC"
    shifts: list[Shift] = field(default_factory=_default_shifts)

    def __post_init__(self) -> None:
        require(self.target_passes_per_shift >= 0, "target_passes_per_shift must be >= 0")
        require(len(self.shifts) > 0, "a site needs at least one shift")
        mins = [s.minutes for s in self.shifts]
        require(mins == sorted(set(mins)), "shifts must be listed in increasing start time, no duplicates")
        try:
            pl.Series([0], dtype=pl.Datetime("us", "UTC")).dt.convert_time_zone(self.timezone)
        except pl.exceptions.PolarsError as exc:  # unknown zone
            raise ConfigError(f"unknown timezone {self.timezone!r}: {exc}") from exc


@dataclass
class AcceptanceConfig:
    version: int
    default: SiteAcceptance = field(default_factory=SiteAcceptance)
    sites: dict[str, SiteAcceptance] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(self.version == ACCEPTANCE_VERSION, f"acceptance config version {self.version!r} not supported")

    def for_site(self, site: str) -> SiteAcceptance:
        """The site's own acceptance thresholds, or the default ones."""
        return self.sites.get(site, self.default)


def load_acceptance(path: str) -> AcceptanceConfig:
    """Load per-site acceptance criteria (YAML).

    Args:
        path: the acceptance config file (e.g. specs/site_acceptance.yaml).

    Returns:
        The validated AcceptanceConfig.

    Raises:
        ConfigError: the file is missing, not YAML, or a field is invalid.
    """
    return load_yaml(AcceptanceConfig, path)


@dataclass(frozen=True)
class AcceptanceResult:
    """What `evaluate` recounted: at which catalog version, which days, and the shift yield rows."""

    catalog_version: int
    days: list[str]
    episodes: int
    passes: int
    shifts: pl.DataFrame  # the recomputed yield rows (YIELD_SCHEMA)


def evaluate(
    config: AcceptanceConfig, catalog: Catalog, yield_uri: str, storage_options: dict[str, str] | None = None
) -> AcceptanceResult:
    """Recount the shifts touching catalog days changed since the last evaluation; merge them into the yield table.

    Args:
        config: per-site criteria, shifts and targets.
        catalog: the episode catalog.
        yield_uri: the yield Delta table (created on first use).
        storage_options: delta-rs options for `yield_uri`.

    Returns:
        The AcceptanceResult (catalog version, days recounted, episodes, passes, shift rows).

    Raises:
        CatalogError: the catalog cannot be read.
        RobodataError: the yield table's commits kept conflicting.
    """
    dt = catalog.table()
    version = dt.version()
    previous = last_evaluated_version(yield_uri, storage_options)
    days = [d for d in changed_days(catalog, previous, dt) if d != "unknown"]
    # A shift (< 24 h, any time zone) touching UTC day d lies within days d-1 .. d+1:
    # read those so shifts crossing midnight are recounted whole, keep the touched ones.
    context = sorted({(date.fromisoformat(d) + timedelta(days=k)).isoformat() for d in days for k in (-1, 0, 1)})
    lf = (
        pl.scan_delta(dt)
        .filter(pl.col("day").is_in(context))
        .select("site", "robot", "start_time", "day", "success", "quality_score", "qc_status", "duration_s")
    )
    rows = lf.collect().with_columns(touched=pl.col("day").is_in(days))
    shifts = _shift_yield(config, rows)
    rows = rows.filter(pl.col("touched"))
    _merge_yield(yield_uri, shifts, version, storage_options)
    return AcceptanceResult(version, days, rows.height, int(shifts["passes"].sum() or 0), shifts)


def changed_days(catalog: Catalog, since_version: int | None, current: DeltaTable | None = None) -> list[str]:
    """Days whose data files differ between catalog version `since_version` and now.

    Args:
        catalog: the episode catalog.
        since_version: the version last evaluated; None means every day.
        current: the catalog's DeltaTable at "now", if already open.

    Returns:
        Sorted day strings (may include "unknown").

    Raises:
        CatalogError: a version cannot be opened.
    """
    now = current or catalog.table()
    cur = _files_by_day(now)
    if since_version is None:
        return sorted(set(cur.values()))
    old = _files_by_day(catalog.table(since_version))
    changed = {d for p, d in cur.items() if p not in old} | {d for p, d in old.items() if p not in cur}
    return sorted(changed)


def _files_by_day(dt: DeltaTable) -> dict[str, str]:
    actions = pl.DataFrame(dt.get_add_actions(flatten=True))
    if actions.height == 0:
        return {}
    return dict(zip(actions["path"].to_list(), actions["partition.day"].to_list(), strict=True))


def _shift_yield(config: AcceptanceConfig, rows: pl.DataFrame) -> pl.DataFrame:
    frames = []
    for site in sorted(rows["site"].unique().drop_nulls().to_list()):
        acc = config.for_site(site)
        c = acc.criteria
        passed = (pl.col("quality_score").fill_null(0.0) >= c.min_quality) & (
            pl.col("duration_s").fill_null(0.0) >= c.min_duration_s
        )
        if c.require_success:
            passed = passed & pl.col("success").fill_null(False)
        if c.require_qc_pass:
            passed = passed & (pl.col("qc_status") == "pass")
        starts = [s.minutes for s in acc.shifts]
        names = [s.name for s in acc.shifts]
        local = pl.col("start_time").dt.convert_time_zone(acc.timezone)
        minute = local.dt.hour().cast(pl.Int32) * 60 + local.dt.minute().cast(pl.Int32)
        idx = pl.lit(-1, dtype=pl.Int32)
        for i, m in enumerate(starts):
            idx = pl.when(minute >= m).then(pl.lit(i, dtype=pl.Int32)).otherwise(idx)
        before_first = idx < 0
        shift_i = pl.when(before_first).then(len(starts) - 1).otherwise(idx)
        shift_date = pl.when(before_first).then(local.dt.date() - pl.duration(days=1)).otherwise(local.dt.date())
        shift_min = shift_i.replace_strict(dict(enumerate(starts)), return_dtype=pl.Int64)
        df = rows.filter(pl.col("site") == site).with_columns(
            passed=passed,
            shift=shift_i.replace_strict(dict(enumerate(names)), return_dtype=pl.String),
            shift_date=shift_date,
            shift_min=shift_min,
        )
        df = df.with_columns(
            shift_start=(pl.col("shift_date").cast(pl.Datetime("us")) + pl.duration(minutes=pl.col("shift_min")))
            .dt.replace_time_zone(acc.timezone, ambiguous="earliest", non_existent="null")
            .dt.convert_time_zone("UTC")
        )
        agg = df.group_by("site", "robot", "shift", "shift_date", "shift_start").agg(
            episodes=pl.len().cast(pl.Int64),
            passes=pl.col("passed").sum().cast(pl.Int64),
            day=pl.col("day").min(),
            touched=pl.col("touched").any(),
        )
        agg = agg.filter(pl.col("touched"))
        frames.append(
            agg.with_columns(
                yield_frac=pl.col("passes") / pl.col("episodes"),
                target_passes=pl.lit(acc.target_passes_per_shift, dtype=pl.Int64),
                meets_target=pl.col("passes") >= acc.target_passes_per_shift,
                shift_date=pl.col("shift_date").cast(pl.String),
            )
        )
    if not frames:
        return pl.DataFrame(YIELD_SCHEMA.empty_table())
    out = pl.concat(frames).select(YIELD_SCHEMA.names).sort("site", "robot", "shift_start")
    return pl.DataFrame(out.to_arrow().cast(YIELD_SCHEMA))


def last_evaluated_version(
    yield_uri: str, storage_options: dict[str, str] | None = None, lookback: int = 20
) -> int | None:
    """The catalog version recorded by the newest of the last `lookback` commits that has one.

    The commit infos are read from the `_delta_log/<version>.json` objects (fsspec, options from
    the AWS_* variables as everywhere): DeltaTable.history() keeps the GIL while it lists the log
    on S3, which stalls an in-process S3 endpoint and every other thread of the step."""
    try:
        latest = DeltaTable(yield_uri, storage_options=storage_options).version()
    except TableNotFoundError:
        return None
    opts = StorageLocation.from_env(yield_uri).fsspec_options()
    for v in range(latest, max(-1, latest - lookback), -1):
        try:
            text = objects.read_bytes(f"{yield_uri.rstrip('/')}/_delta_log/{v:020d}.json", opts).decode()
        except FileNotFoundError:  # older commits cleaned up after a checkpoint
            return None
        for line in text.splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info and META_KEY in info:
                return int(info[META_KEY])
    return None


def _merge_yield(uri: str, shifts: pl.DataFrame, catalog_version: int, storage_options: dict[str, str] | None) -> None:
    props = CommitProperties(custom_metadata={META_KEY: str(catalog_version)}, max_commit_retries=50)
    source = shifts.to_arrow().cast(YIELD_SCHEMA)
    for _attempt in range(30):
        try:
            try:
                dt = DeltaTable(uri, storage_options=storage_options)
            except TableNotFoundError:
                write_deltalake(
                    uri,
                    source,
                    partition_by=["site"],
                    mode="error",
                    storage_options=storage_options,
                    commit_properties=props,
                    writer_properties=WriterProperties(compression="ZSTD"),
                )
                return
            (
                dt.merge(
                    source,
                    "t.site = s.site AND t.robot = s.robot AND t.shift_start = s.shift_start",
                    source_alias="s",
                    target_alias="t",
                    commit_properties=props,
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            return
        except CommitFailedError:
            continue
    raise RobodataError(f"acceptance table {uri}: commit kept conflicting")


def read_yield(uri: str, storage_options: dict[str, str] | None = None, since_day: str | None = None) -> pl.DataFrame:
    """The yield table (shifts from `since_day` on, when given; partition-pruned by site only).

    Args:
        uri: the yield Delta table.
        storage_options: delta-rs options for `uri`.
        since_day: keep shifts of this ISO day and later.

    Returns:
        The yield rows (YIELD_SCHEMA) as a Polars DataFrame.
    """
    lf = pl.scan_delta(DeltaTable(uri, storage_options=storage_options))  # delta-rs options, S3 included
    if since_day:
        lf = lf.filter(pl.col("day") >= since_day)
    return lf.collect()


def summary_markdown(shifts: pl.DataFrame, limit: int = 20) -> str:
    """A markdown table of the latest shifts (passes vs target per robot).

    Args:
        shifts: yield rows (YIELD_SCHEMA).
        limit: at most this many shifts, newest first.

    Returns:
        The markdown text.
    """
    latest = shifts.sort("shift_start", descending=True).head(limit)
    lines = ["| site | robot | shift | date | passes | target | yield |", "|---|---|---|---|---|---|---|"]
    for r in latest.iter_rows(named=True):
        mark = "ok" if r["meets_target"] else "BELOW"
        lines.append(
            f"| {r['site']} | {r['robot']} | {r['shift']} | {r['shift_date']} | {r['passes']} "
            f"| {r['target_passes']} ({mark}) | {r['yield_frac']:.0%} |"
        )
    return "\n".join(lines)
