"""Catalog automation, decided from facts (the logic of sensors/automation.py).

Every consumer of the catalog (`site_acceptance`; `manifest`, one target per registered spec) is a
`Target`. Each tick, for each target, the sensor reads:

* the catalog's Delta version now (`wanted`; a spec pinned to a version wants that one);
* what its latest materialization read (`catalog_version_read`, else `catalog_version` for
  materializations written before it was recorded) and, for a manifest, from which spec hash;
* whether a run for it is in flight (not finished, or failed with a run retry still to come);
* its latest finished run: failed on its config (`robodata/failure: config`) after reading which
  spec file (`robodata/spec-digest`).

`decide` then requests a run when the target has not read the version it wants (or read it
through another spec) and nothing for it is in flight: a catalog commit that lands while a run
is in flight is seen on the first tick after that run ends, whatever it read, so no refresh is
lost. It never requests a target whose file is invalid, nor one whose last run failed on the
config file that is still there; the run key (target, wanted version, file digest) keeps a run
that failed for another reason (after its run retries) from being requested again until the
catalog or the file changes. A refresh that selects the same rows is a no-op by identity
(assets/curation.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import dagster as dg

from robodata_dagster.lib.steps import FAILURE_TAG  # "config" on a run that failed on its config

SPEC_DIGEST_TAG = "robodata/spec-digest"  # the spec file a manifest run read (assets/curation.py)
PARTITION_TAG = "dagster/partition"
WILL_RETRY_TAG = "dagster/will_retry"
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"


@dataclass(frozen=True)
class Target:
    asset: str  # asset key
    partition: str | None
    job: str
    wanted: int  # the catalog version it should have read
    digest: str = ""  # its spec / config file's sha256
    error: str = ""  # why the file is invalid ("" when valid)
    spec_hash: str = ""  # a manifest's spec hash (the latest materialization must be of it)

    @property
    def label(self) -> str:
        return f"{self.asset}[{self.partition}]" if self.partition else self.asset


@dataclass(frozen=True)
class Facts:
    read_version: int | None = None  # None: never materialized
    read_spec_hash: str = ""
    in_flight: bool = False
    config_failure_digest: str | None = None  # the file digest its last run failed on, if on config


@dataclass(frozen=True)
class Decision:
    request: bool
    why: str
    run_key: str = ""


def decide(t: Target, f: Facts) -> Decision:
    if t.error:
        return Decision(False, f"{t.label}: invalid, not requested: {t.error}")
    if f.in_flight:
        return Decision(False, f"{t.label}: a run is in flight")
    if f.config_failure_digest is not None and f.config_failure_digest == t.digest:
        return Decision(False, f"{t.label}: its last run failed on its config; waiting for the file to change")
    caught_up = f.read_version is not None and f.read_version >= t.wanted
    if caught_up and (not t.spec_hash or f.read_spec_hash == t.spec_hash):
        return Decision(False, f"{t.label}: caught up (read catalog v{f.read_version})")
    read = "never materialized" if f.read_version is None else f"read v{f.read_version}"
    key = f"{t.label}@{t.wanted}:{t.digest[:16]}"
    return Decision(True, f"{t.label}: {read}, catalog at v{t.wanted}", key)


def _partition(run: dg.DagsterRun) -> str | None:
    return run.tags.get(PARTITION_TAG)


def _assets(run: dg.DagsterRun) -> set[str]:
    return {k.to_user_string() for k in (run.asset_selection or ())}


def in_flight(instance: dg.DagsterInstance) -> set[tuple[str, str | None]]:
    """(asset, partition) of every run not finished, or failed with an automatic retry to come."""
    from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES

    runs = list(instance.get_runs(filters=dg.RunsFilter(statuses=NOT_FINISHED_STATUSES)))
    failed = dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], tags={WILL_RETRY_TAG: "true"})
    runs += [r for r in instance.get_runs(filters=failed, limit=100) if AUTO_RETRY_RUN_ID_TAG not in r.tags]
    return {(a, _partition(r)) for r in runs for a in _assets(r)}


def last_run(instance: dg.DagsterInstance, asset: str, partition: str | None, job: str) -> dg.DagsterRun | None:
    """The newest finished run that materialized (or tried to) `asset` [partition]."""
    from dagster._core.storage.dagster_run import FINISHED_STATUSES

    tags = {PARTITION_TAG: partition} if partition else {}
    filt = dg.RunsFilter(statuses=FINISHED_STATUSES, tags=tags, job_name=None if partition else job)
    for run in instance.get_runs(filters=filt, limit=20):
        if asset in _assets(run) and _partition(run) == partition:
            return run
    return None


def facts(instance: dg.DagsterInstance, t: Target, flying: set[tuple[str, str | None]]) -> Facts:
    key = dg.AssetKey(t.asset)
    filt = dg.AssetRecordsFilter(asset_key=key, asset_partitions=[t.partition] if t.partition else None)
    records = instance.fetch_materializations(filt, limit=1).records
    read, spec_hash = None, ""
    if records and records[0].asset_materialization is not None:
        md = records[0].asset_materialization.metadata
        entry = md.get("catalog_version_read", md.get("catalog_version"))
        read = int(entry.value) if entry is not None else None  # type: ignore[arg-type]
        spec_hash = str(md["spec_hash"].value) if "spec_hash" in md else ""
    config_digest = None
    run = last_run(instance, t.asset, t.partition, t.job)
    if run is not None and run.status == dg.DagsterRunStatus.FAILURE and run.tags.get(FAILURE_TAG) == "config":
        config_digest = run.tags.get(SPEC_DIGEST_TAG, "")
    return Facts(read, spec_hash, (t.asset, t.partition) in flying, config_digest)


def requests(instance: dg.DagsterInstance, targets: Iterable[Target]) -> tuple[list[dg.RunRequest], list[str]]:
    """The run requests of this tick and why each target was or was not requested."""
    flying = in_flight(instance)
    out: list[dg.RunRequest] = []
    notes: list[str] = []
    for t in targets:
        d = decide(t, facts(instance, t, flying))
        notes.append(d.why)
        if d.request:
            tags = {SPEC_DIGEST_TAG: t.digest} if t.digest else {}
            out.append(
                dg.RunRequest(
                    run_key=d.run_key,
                    job_name=t.job,
                    partition_key=t.partition,
                    tags={**tags, "robodata/catalog-version": str(t.wanted)},
                )
            )
    return out, notes
