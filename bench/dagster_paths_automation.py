"""Part of bench.dagster_paths: the automation keys, on an instance of their own with the daemon running
and the landing-zone sensor started, as the README says, from a site folder holding its own specs/.

missed_refreshes: ROUNDS rounds (10 at --quick): a recording is moved into the landing zone and,
    once its commit has set manifest runs going, another at a random moment while one is in flight
    (queued or running); once the daemon quiesces (no run queued or running for QUIET_S seconds,
    both recordings in the catalog), the valid specs whose latest manifest materialization read an
    older catalog version than the catalog's now. drops_during_manifest_runs: the second drops made
    during a manifest run; commits_during_manifest_runs: catalog commits that landed while a
    manifest run was in flight (the race the sensor must not lose).
manifest_rewrites_without_row_change: per spec, materializations whose rows equal the previous
    one's (read with pyarrow) but whose file or data version differ, plus manifest files holding
    another file's rows; refresh_noops: the refreshes that selected the previous rows (they happen).
half_copied_ingests, ghost_rows: meanwhile SLOW MCAP files and SLOW JPEG folders are copied into the
    landing zone in chunks with pauses (some MCAPs pause 12 s mid-file, longer than the settle
    window; folders get `_COMPLETE` first, as `cp -r` orders it, or last after a 12 s pause): the
    items claimed before they were whole (a batch recording a smaller size, the item twice, or as
    unrecognized), and the catalog rows that are no recording dropped here.
runs_for_invalid_specs: two invalid spec files (an unknown column; a `name:` that is not the file's),
    refused by `robodata-dagster specs`, and `flaky`, broken before the last round and run once by
    hand (`dg launch`, failing on its config): the runs made for them besides that one.
config_failures_retried: runs retrying a run that failed on its config.
checks_per_partition: the first recording is broken (a truncated JPEG), the next ones pass: every
    QC check evaluation carries its batch, the broken batch's `converted` check is still failed at
    the end, and a later batch's passed.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from robodata.ingest.synth import SynthConfig, synthesize

ROUNDS = {"smoke": 1, "quick": 10, "full": 10}
SLOW = {"smoke": 1, "quick": 10, "full": 10}  # MCAP files and JPEG folders, each
QUIET_S = 20.0  # > the catalog automation's interval (15 s)
LONG_PAUSE_S = 12.0  # > the live sensor's settle window (5 s settle, 5 s ticks)
REPO = Path(__file__).resolve().parents[1]
SPECS = {
    "demo": (REPO / "specs" / "curation" / "demo.yaml").read_text(),
    "site-a": "version: 1\nname: site-a\nfilters:\n  - {column: site, op: '==', value: site-a}\n",
    "flaky": "version: 1\nname: flaky\nfilters:\n  - {column: site, op: '==', value: site-b}\n",
    "bad-column": "version: 1\nname: bad-column\nfilters:\n  - {column: qc_statsu, op: '==', value: pass}\n",
    "bad-name": "version: 1\nname: other-name\n",
}
INVALID = ("bad-column", "bad-name")


def site_folder(root: Path) -> Path:
    """A folder like a deployment's checkout: its specs/ (the valid and the invalid ones)."""
    (root / "specs" / "curation").mkdir(parents=True)
    shutil.copytree(REPO / "specs" / "training", root / "specs" / "training")
    shutil.copy(REPO / "specs" / "site_acceptance.yaml", root / "specs" / "site_acceptance.yaml")
    shutil.copy(REPO / "workspace.yaml", root / "workspace.yaml")
    for name, text in SPECS.items():
        (root / "specs" / "curation" / f"{name}.yaml").write_text(text)
    return root


class Drops:
    """Recordings written in a stage folder, then moved (or copied slowly) into the landing zone."""

    def __init__(self, landing: Path, stage: Path, size: tuple[int, float, int]):
        self.landing, self.stage, self.size, self.k = landing, stage, size, 0
        self.ids: list[str] = []
        landing.mkdir(parents=True, exist_ok=True)

    def make(self, site: str, fmt: str = "jpeg", broken: bool = False) -> Path:
        self.k += 1
        _, duration, px = self.size
        start = f"2026-11-{1 + self.k % 28:02d}T{self.k % 24:02d}:00:00+00:00"
        cams = ("cam_left", "wrist")
        cfg = SynthConfig(1, duration, cams, px, px, fps=10.0, state_hz=20.0, format=fmt, site=site, start=start)
        (path,) = synthesize(dataclasses.replace(cfg, seed=self.k), self.stage / str(self.k))
        if broken:
            victim = sorted((path / "wrist").glob("*.jpg"))[1]
            victim.write_bytes(victim.read_bytes()[:64])
        self.ids.append(path.stem if fmt == "mcap" else path.name)
        return path

    def move(self, path: Path) -> None:
        path.rename(self.landing / path.name)

    def copy_all_slowly(self, paths: list[Path], rng: random.Random) -> None:
        for i, p in enumerate(paths):
            self.copy_slowly(p, rng, long_pause=i % 2 == 1)

    def copy_slowly(self, path: Path, rng: random.Random, long_pause: bool) -> None:
        """In chunks, with pauses; a long one mid-way when `long_pause`."""
        dest = self.landing / path.name
        if path.is_file():
            data = path.read_bytes()
            step = max(1, len(data) // 6)
            with open(dest, "wb") as f:
                for i in range(0, len(data), step):
                    f.write(data[i : i + step])
                    f.flush()
                    pause = LONG_PAUSE_S if long_pause and i == 3 * step else rng.uniform(0.2, 1.5)
                    time.sleep(pause if i + step < len(data) else 0)
            return
        files = sorted(p for p in path.rglob("*") if p.is_file())
        marker = path / "_COMPLETE"
        if long_pause:  # moved in before its marker: the marker comes last, after a long pause
            files = [p for p in files if p != marker]
        for p in files:  # sorted: `_COMPLETE` sorts before the cameras' folders, as `cp -r` copies it
            target = dest / p.relative_to(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)
            time.sleep(rng.uniform(0.05, 0.6))
        if long_pause:
            time.sleep(LONG_PAUSE_S)
            shutil.copyfile(marker, dest / "_COMPLETE")


def _manifest_run_in_flight(instance, timeout_s: float) -> bool:
    import dagster as dg

    deadline = time.monotonic() + timeout_s
    flying = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    while time.monotonic() < deadline:
        if instance.get_runs(filters=dg.RunsFilter(job_name="curation", statuses=flying), limit=1):
            return True
        time.sleep(0.3)
    return False


def _catalog_ids(state: Path) -> list[str]:
    from deltalake import DeltaTable

    uri = state / "catalog" / "episodes"
    if not (uri / "_delta_log").exists():
        return []
    return DeltaTable(str(uri)).to_pyarrow_table(columns=["episode_id"]).column("episode_id").to_pylist()


def quiesce(instance, state: Path, want: set[str], timeout_s: float) -> bool:
    """Wait until every id of `want` is in the catalog and no run was queued or running for QUIET_S."""
    import dagster as dg
    from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES

    deadline = time.monotonic() + timeout_s
    quiet_since = None
    while time.monotonic() < deadline:
        busy = instance.get_runs(filters=dg.RunsFilter(statuses=NOT_FINISHED_STATUSES), limit=1)
        ended = [r.end_time or 0 for r in instance.get_run_records(limit=5)]
        last = max(ended, default=0.0)
        if busy or not want <= set(_catalog_ids(state)):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = max(time.time(), last)
        elif time.time() - max(quiet_since, last) >= QUIET_S:
            return True
        time.sleep(1.0)
    return False


def missed(instance, state: Path, specs: list[str]) -> list[str]:
    """Specs whose latest manifest materialization read a catalog version older than the catalog's."""
    import dagster as dg
    from deltalake import DeltaTable

    version = DeltaTable(str(state / "catalog" / "episodes")).version()
    behind = []
    for spec in specs:
        filt = dg.AssetRecordsFilter(asset_key=dg.AssetKey("manifest"), asset_partitions=[spec])
        recs = instance.fetch_materializations(filt, limit=1).records
        md = recs[0].asset_materialization.metadata if recs else {}
        read = md["catalog_version_read"].value if "catalog_version_read" in md else -1
        if read < version:
            behind.append(f"{spec}: read v{read}, catalog v{version}")
    return behind


def rewrites(instance, state: Path, specs: list[str]) -> tuple[int, int]:
    """(rewrites without a row change, refreshes with the previous rows) over every spec's history."""
    import dagster as dg
    import pyarrow.parquet as pq

    def rows(path: str):
        t = pq.read_table(path).replace_schema_metadata(None)
        return t.sort_by("episode_id")

    bad = same = 0
    for spec in specs:
        filt = dg.AssetRecordsFilter(asset_key=dg.AssetKey("manifest"), asset_partitions=[spec])
        recs = instance.fetch_materializations(filt, limit=1000, ascending=True).records
        prev = None
        for rec in recs:
            mat = rec.asset_materialization
            cur = (mat.metadata["path"].value, mat.tags.get("dagster/data_version"))
            table = rows(cur[0])
            if prev is not None and table.equals(prev[2]):
                same += 1
                bad += int(cur != prev[:2])
            prev = (*cur, table)
        files = [rows(str(p)) for p in (state / "manifests").glob(f"{spec}-*.parquet")]
        bad += sum(1 for i, a in enumerate(files) for b in files[:i] if a.equals(b))
    return bad, same


def half_copied(state: Path, landing: Path, names: list[str]) -> list[str]:
    """The slowly copied items claimed before they were whole (see the module docstring)."""
    claims: dict[str, list[dict]] = {}
    for f in (state / "ingest" / "batches").glob("*.json"):
        for item in json.loads(f.read_text())["items"]:
            claims.setdefault(item["name"], []).append(item)
    out = []
    for name in names:
        path = landing / name
        final = path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        got = claims.get(name, [])
        early = [c for c in got if c["kind"] == "unrecognized" or (path.is_file() and c["size_bytes"] < final)]
        if len(got) > 1 or early:
            out.append(f"{name}: claimed {len(got)}x, {[(c['kind'], c['size_bytes']) for c in got]} of {final} B")
    return out


def checks_per_partition(instance, broken_batch: str | None) -> bool:
    """Every QC evaluation carries its batch; the broken batch's `converted` is still failed, a later one passed."""
    import dagster as dg
    from dagster._core.event_api import PartitionKeyFilter
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus as Status

    key = dg.AssetCheckKey(dg.AssetKey("episodes"), "converted")
    history = instance.event_log_storage.get_asset_check_execution_history(key, limit=1000)
    evaluations = [r.event.dagster_event.event_specific_data for r in history if r.event and r.event.dagster_event]
    partitions = [getattr(e, "partition", None) for e in evaluations]
    if broken_batch is None or not partitions or None in partitions:
        return False
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key
    status = {p: latest([key], PartitionKeyFilter(key=p))[key].status for p in set(partitions)}
    return status.get(broken_batch) == Status.FAILED and Status.SUCCEEDED in status.values()


def _runs(instance, **filters: Any) -> list:
    import dagster as dg

    return list(instance.get_run_records(dg.RunsFilter(**filters), limit=5000))


def _break_flaky(u: Any, site: Path, instance) -> tuple[str, float]:
    """`flaky` turns invalid; run by hand (README: `dg launch`), it fails on its config once."""
    bad = SPECS["bad-column"].replace("bad-column", "flaky")
    (site / "specs" / "curation" / "flaky.yaml").write_text(bad)
    u.launch_job("curation", "flaky")
    rec = _runs(instance, tags={"dagster/partition": "flaky"})[0]
    return rec.dagster_run.run_id, rec.create_timestamp.timestamp()


def _rounds(u: Any, instance, drops: Drops, slow: threading.Thread, site: Path, size: str) -> dict[str, Any]:
    rng = random.Random(7)
    seen: set[str] = set()
    drops.move(drops.make("site-a", broken=True))
    seen.add(drops.ids[-1])
    settled = quiesce(instance, u.state, seen, 600)
    first = _runs(instance, job_name="live")
    broken_batch = first[-1].dagster_run.tags.get("dagster/partition") if first else None
    slow.start()
    behind: list[str] = []
    valid, hand = ["demo", "site-a", "flaky"], ("", 0.0)
    during = 0
    for r in range(ROUNDS[size]):
        if r == ROUNDS[size] - 1:
            hand = _break_flaky(u, site, instance)
            valid.remove("flaky")
        drops.move(drops.make("site-a" if r % 2 else "site-b"))  # its commit sets manifest runs going
        seen.add(drops.ids[-1])
        if _manifest_run_in_flight(instance, 180):  # then a random moment while one is in flight
            during += 1
            time.sleep(rng.uniform(0.0, 5.0))
        drops.move(drops.make("site-b"))
        seen.add(drops.ids[-1])
        settled = quiesce(instance, u.state, seen, 900) and settled
        behind += [f"round {r}: {b}" for b in missed(instance, u.state, valid)]
    slow.join()
    settled = quiesce(instance, u.state, set(drops.ids), 900) and settled
    return {"behind": behind, "settled": settled, "broken_batch": broken_batch, "hand": hand, "during": during}


def _commits_during_manifest_runs(instance, state: Path) -> int:
    from deltalake import DeltaTable

    history = DeltaTable(str(state / "catalog" / "episodes")).history()
    commits = [h["timestamp"] / 1000 for h in history if h.get("operation") == "MERGE"]
    spans = [(r.start_time or 0.0, r.end_time or time.time()) for r in _runs(instance, job_name="curation")]
    return sum(any(a <= c <= b for a, b in spans) for c in commits)


def automation(tmp: Path, size: str, dims: tuple[int, float, int], user_cls: Any) -> dict[str, Any]:
    """The automation keys (module docstring); `user_cls`: bench.dagster_paths.User."""
    site = site_folder(tmp / "site")
    u = user_cls(tmp / "user", cwd=site)
    drops = Drops(Path(u.env["ROBODATA_LANDING"]), tmp / "stage", dims)
    u.init_instance()
    specs = u.run("robodata-dagster", "specs")  # refuses the two invalid files, exit 1
    refused = specs.returncode == 1 and all(f"{n}.yaml" in specs.stderr for n in INVALID)
    slow_items = [drops.make("site-c", "mcap") for _ in range(SLOW[size])]
    slow_items += [drops.make("site-d") for _ in range(SLOW[size])]
    rng = random.Random(41)
    slow = threading.Thread(target=drops.copy_all_slowly, args=(slow_items, rng), daemon=True)
    u.run("dagster", "sensor", "start", "landing_zone_live_sensor", "-w", "workspace.yaml")
    u.spawn("dagster-daemon", "run", "-w", "workspace.yaml", log="daemon.log")
    try:
        with u.instance() as instance:
            got = _rounds(u, instance, drops, slow, site, size)
            runs = [r.dagster_run for r in _runs(instance)]
            hand_run, hand_at = got["hand"]
            late = {
                r.dagster_run.run_id
                for r in _runs(instance, tags={"dagster/partition": "flaky"})
                if r.create_timestamp.timestamp() > hand_at and r.dagster_run.run_id != hand_run
            }
            config_failed = {r.run_id for r in runs if r.tags.get("robodata/failure") == "config"}
            bad, noops = rewrites(instance, u.state, ["demo", "site-a", "flaky"])
            ids = _catalog_ids(u.state)
            half = half_copied(u.state, drops.landing, [p.name for p in slow_items])
            out = {
                "missed_refreshes": len(got["behind"]),
                "missed_refresh_details": got["behind"][:10],
                "drops_during_manifest_runs": got["during"],
                "commits_during_manifest_runs": _commits_during_manifest_runs(instance, u.state),
                "manifest_runs": sum(r.job_name == "curation" for r in runs),
                "manifest_rewrites_without_row_change": bad,
                "refresh_noops": noops,
                "half_copied_ingests": len(half),
                "half_copied_details": half[:10],
                "ghost_rows": len(set(ids) - set(drops.ids)),
                "rows_missing": sorted(set(drops.ids) - set(ids))[:10],
                "runs_for_invalid_specs": sum(r.tags.get("dagster/partition") in INVALID for r in runs) + len(late),
                "invalid_specs_refused": refused,
                "config_failure_run": hand_run in config_failed,
                "config_failures_retried": sum(r.tags.get("dagster/parent_run_id") in config_failed for r in runs),
                "checks_per_partition": checks_per_partition(instance, got["broken_batch"]),
                "automation_settled": got["settled"],
            }
    finally:
        u.stop_all()
    out["automation_home"] = str(u.home)
    out["automation_warnings"] = u.warnings
    return out
