"""Each way a user drives the Dagster layer, exercised as they would, from the repo root with the
installed commands (`dg`, `dagster`, `dagster-daemon`, `dagster-webserver`, `robodata-dagster`) on a
fresh instance (the embedded default: SQLite under a temporary DAGSTER_HOME, local files). Every
server runs in a process group of its own under a watchdog (robodata_testing.procs).

    python -m bench.dagster_paths --quick        (--smoke: tiny episodes, same paths and keys)

cli_materialize_ok: `robodata-dagster add-batch` (the batch manifest, then the `ingest_batch`
    partition), then `dg launch --job full --partition <batch>`, in a subprocess: exit 0, every good
    episode in a container and in the catalog, a broken one quarantined; and a partition that was
    never added fails with an error naming it.
daemon_sensor_runs: `dagster sensor start landing_zone_live_sensor` + `dagster-daemon run`; two
    batches are dropped into the landing zone one after the other (moved in, as an uploader does):
    successful runs the daemon launched from the sensor.
incremental_second_batch_only: the second run's partition is the second batch, it converted only
    that batch's episodes, and the first batch's containers were not touched.
ui_pages_ok: pages of `dagster-webserver` rendered in headless Chromium with no error banner: the
    asset graph, a partitioned asset's partitions, asset checks showing a quarantine reason, the
    sensors, a batch's preview images (bench/dagster_paths_ui.py); of 5.
lineage_resolves: after `robodata-dagster specs` and materializing manifest[demo] and
    training_run[demo|demo] with `dg launch --job curation|training`, `robodata-dagster lineage` resolves the
    newest checkpoint to its manifest partition and catalog Delta version from the event log alone,
    matching the checkpoint's own meta.json and the catalog; `robodata lineage --episodes` lists
    the manifest's training episodes.
definitions_import_s: median wall time of 3 fresh `python -c 'import robodata_dagster.definitions'`.
wheel_load_ok: the checkout built with `pip wheel --no-deps`, installed alone into a folder outside it,
    and the code location loaded from there (bench/dagster_paths_wheel.py).
assets_without_kinds: assets with no `kinds`. delta_assets_without_schema: assets of kind `delta`
    whose latest materialization in this bench has no `dagster/column_schema` or `dagster/row_count`
    (of delta_assets_checked: those materialized here).
manifest_auto_materialized: after the daemon's second batch, a `manifest` materialization by a run of
    `catalog_automation_sensor` (the catalog automation) that read the catalog with that batch, with
    no manual step.
training_input_typed: `training_run` takes `manifest` as a typed ManifestRef input, and the ref it
    recorded is the manifest materialization the lineage resolves to.
run_kind_tagged_on_cli_path: the CLI path's runs (`dg launch --job full|curation|training`)
    carry the `robodata/run-kind` tag of their job (the run queue keys on it).
preview_warnings: Python warnings (preview, beta, deprecated APIs) while the code location is
    imported and its definitions built. cli_warnings: warnings (supersession, beta, preview,
    deprecation) the README's commands print, counted over every command this bench runs as a user
    (cli_superseded_warnings: those of them that say a command is superseded by `dg`).
The automation keys (missed_refreshes, manifest_rewrites_without_row_change, half_copied_ingests,
ghost_rows, runs_for_invalid_specs, config_failures_retried, checks_per_partition):
bench/dagster_paths_automation.py; processes_left: bench/dagster_paths_procs.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import emit, parse, size_of
from bench.dagster_paths_automation import automation
from bench.dagster_paths_procs import counted, injected_timeout
from bench.dagster_paths_surface import cli_run_kinds, lineage, load_warnings, vocabulary
from bench.dagster_paths_wheel import build_wheel, definitions_import_s, load_from_wheel
from robodata_testing import procs

KEYS = (
    "peak_rss_mb",
    "cli_materialize_ok",
    "daemon_sensor_runs",
    "incremental_second_batch_only",
    "ui_pages_ok",
    "lineage_resolves",
    "preview_warnings",
    "definitions_import_s",
    "wheel_load_ok",
    "assets_without_kinds",
    "delta_assets_without_schema",
    "manifest_auto_materialized",
    "training_input_typed",
    "run_kind_tagged_on_cli_path",
    "missed_refreshes",
    "manifest_rewrites_without_row_change",
    "half_copied_ingests",
    "ghost_rows",
    "runs_for_invalid_specs",
    "config_failures_retried",
    "checks_per_partition",
    "processes_left",
    "cli_warnings",
)

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# episodes per batch, seconds per episode, frame size
SIZES = {"smoke": (1, 1.0, 16), "quick": (2, 2.0, 32), "full": (6, 4.0, 64)}


WARNING_LINE = re.compile(r"\b(Supersession|Beta|Preview|Deprecation|Experimental)Warning\b")


class User:
    """A shell in `cwd` (the repo root) with the venv's commands and a fresh instance."""

    def __init__(self, tmp: Path, cwd: Path = REPO):
        self.tmp, self.home, self.state, self.cwd = tmp, tmp / "dagster_home", tmp / "state", cwd
        self.home.mkdir(parents=True)
        local = (REPO / "deploy" / "dagster.local.yaml").read_text()
        (self.home / "dagster.yaml").write_text(local + "\nnux:\n  enabled: false\n")
        self.env = dict(
            os.environ,
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            DAGSTER_HOME=str(self.home),
            DAGSTER_DISABLE_TELEMETRY="1",
            ROBODATA_DEPLOYMENT="local",
            ROBODATA_STORAGE_ROOT=str(self.state),
            ROBODATA_LANDING=str(tmp / "landing"),
        )
        self.superseded = 0
        self.warnings: list[str] = []
        self.spawned: list[subprocess.Popen] = []

    def run(self, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
        out = subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout)
        self.superseded += out.stderr.count("SupersessionWarning")
        self.warnings += [ln.strip()[:200] for ln in (out.stdout + out.stderr).splitlines() if WARNING_LINE.search(ln)]
        return out

    def launch_job(self, job: str, partition: str, config: dict | None = None) -> subprocess.CompletedProcess:
        """`dg launch -m robodata_dagster.definitions --job JOB --partition PARTITION [-c run.yaml]` (README)"""
        argv = ["dg", "launch", "-m", "robodata_dagster.definitions", "--job", job, "--partition", partition]
        if config:
            path = self.tmp / f"{job}-{len(list(self.tmp.glob('*.run.yaml')))}.run.yaml"
            path.write_text(json.dumps(config))  # JSON is YAML
            argv += ["-c", str(path)]
        return self.run(*argv)

    def spawn(self, *argv: str, log: str) -> subprocess.Popen:
        """A server in a process group of its own, under a watchdog (robodata_testing.procs)."""
        proc = procs.spawn(list(argv), log=self.tmp / log, env=self.env, cwd=self.cwd)
        self.spawned.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.spawned:
            stop(proc)

    def init_instance(self) -> None:
        """Create the instance's SQLite storages once, before several processes open it at the same
        time (concurrent first opens of a fresh instance race on its schema migrations)."""
        with self.instance() as instance:
            instance.get_run_records(limit=1)

    def instance(self):
        import dagster as dg

        return dg.DagsterInstance.from_config(str(self.home))


def stop(proc: subprocess.Popen) -> None:
    """Stop a server and everything in its process group."""
    procs.stop(proc)


def synth(dest: Path, n: int, duration: float, px: int, seed: int, broken: bool = False) -> list[str]:
    """n episodes of site `site-<seed>` (+ one with a truncated JPEG when `broken`: quarantined with
    its reason) written to a staging folder next to `dest`, then moved into `dest` one item at a
    time (complete items appear atomically, as an upload does)."""
    from robodata.ingest.synth import SynthConfig, synthesize

    stage = dest.parent / f".stage-{seed}"

    def cfg(episodes: int, seed: int, site: str) -> SynthConfig:
        cams = ("cam_left", "wrist")
        return SynthConfig(episodes, duration, cams, px, px, fps=10.0, state_hz=20.0, seed=seed, site=site)

    synthesize(cfg(n, seed, f"site-{seed}"), stage)
    if broken:
        (bad,) = synthesize(cfg(1, seed + 1000, "site-broken"), stage)
        victim = sorted((bad / "wrist").glob("*.jpg"))[1]
        victim.write_bytes(victim.read_bytes()[:64])
    dest.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in stage.iterdir())
    for name in names:
        os.rename(stage / name, dest / name)
    shutil.rmtree(stage)
    return names


def batch_rows(state: Path, batch: str) -> list[dict]:
    from deltalake import DeltaTable

    cat = DeltaTable(str(state / "catalog" / "episodes")).to_pyarrow_table()
    return [r for r in cat.to_pylist() if r["ingest_batch"] == batch]


def cli_materialize(u: User, n: int, duration: float, px: int) -> dict[str, Any]:
    synth(u.tmp / "land-cli", n, duration, px, seed=1, broken=True)
    added = u.run("robodata-dagster", "add-batch", str(u.tmp / "land-cli"), "--batch", "cli-1")
    mat = u.launch_job("full", "cli-1")
    rows = batch_rows(u.state, "cli-1") if mat.returncode == 0 else []
    passed = [r for r in rows if r["qc_status"] == "pass"]
    containers = list((u.state / "containers" / "cli-1").rglob("*.rdep"))
    missing = u.launch_job("full", "never-added")
    named = [ln for ln in missing.stderr.splitlines() if "never-added" in ln and "partition" in ln.lower()]
    clear = missing.returncode != 0 and bool(named)
    ok = added.returncode == 0 and mat.returncode == 0 and len(rows) == n + 1 and len(passed) == n == len(containers)
    return {
        "cli_materialize_ok": ok and clear,
        "cli_missing_partition_error": named[-1][-200:] if named else missing.stderr[-200:],
        "cli_errors": "" if ok else (added.stderr + mat.stderr)[-2000:],
    }


def wait_runs(u: User, instance, k: int, timeout_s: float) -> list:
    import dagster as dg

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/sensor_name": "landing_zone_live_sensor"}))
        done = [r for r in runs if r.is_finished]
        if len(done) >= k:
            return sorted(done, key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)
        time.sleep(1)
    return []


def manifest_by_automation(instance, state: Path, timeout_s: float) -> bool:
    """A `manifest` materialization by a run of catalog_automation_sensor that read the catalog's
    version now (after the daemon's second batch: the refresh that batch set going)."""
    import dagster as dg
    from deltalake import DeltaTable

    version = DeltaTable(str(state / "catalog" / "episodes")).version()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for rec in instance.fetch_materializations(dg.AssetKey("manifest"), limit=20).records:
            run = instance.get_run_record_by_id(rec.run_id)
            by_sensor = run.dagster_run.tags.get("dagster/sensor_name") == "catalog_automation_sensor"
            read = rec.asset_materialization.metadata.get("catalog_version_read")
            if by_sensor and read is not None and read.value >= version:
                return True
        time.sleep(2)
    return False


def daemon_sensor(u: User, n: int, duration: float, px: int, cli_done: threading.Event) -> dict[str, Any]:
    """The landing-zone sensor cuts two batches; the catalog change of the second must make the
    automation sensor refresh the manifest. The second batch lands after the CLI paths are done
    (`cli_done`): a CLI materialization of the manifest after it could read that batch first, and
    the automation would rightly have nothing left to do."""
    import dagster as dg

    started = u.run("dagster", "sensor", "start", "landing_zone_live_sensor", "-w", "workspace.yaml")
    daemon = u.spawn("dagster-daemon", "run", "-w", "workspace.yaml", log="daemon.log")
    landing = Path(u.env["ROBODATA_LANDING"])
    t0 = time.perf_counter()
    try:
        with u.instance() as instance:
            synth(landing, n, duration, px, seed=2)
            first = wait_runs(u, instance, 1, 300)
            cli_done.wait(600)
            before = {p: p.stat().st_mtime_ns for p in (u.state / "containers").rglob("*.rdep")}
            synth(landing, n, duration, px, seed=3)
            runs = wait_runs(u, instance, 2, 300)
            ok = [r for r in runs if r.status == dg.DagsterRunStatus.SUCCESS]
            incremental = False
            auto = bool(ok) and manifest_by_automation(instance, u.state, 300)
            if len(ok) == 2 and first:
                second = ok[1]
                mats = {
                    r.event_log_entry.dagster_event.asset_key.to_user_string(): r.event_log_entry.asset_materialization
                    for r in instance.get_records_for_run(
                        second.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION, limit=100
                    ).records
                }
                seen = {k: v.metadata for k, v in mats.items() if v is not None}
                batch2 = second.tags.get("dagster/partition")
                untouched = all(p.stat().st_mtime_ns == t for p, t in before.items())
                incremental = (
                    batch2 != first[0].tags.get("dagster/partition")
                    and seen["raw_episodes"]["episodes"].value == n
                    and seen["episodes"]["converted"].value == n
                    and len(batch_rows(u.state, batch2)) == n
                    and bool(before)
                    and untouched
                )
    finally:
        stop(daemon)
    return {
        "daemon_sensor_runs": len(ok),
        "incremental_second_batch_only": incremental,
        "manifest_auto_materialized": auto,
        "daemon_paths_s": round(time.perf_counter() - t0, 1),
        "daemon_errors": "" if len(ok) == 2 else (started.stderr + (u.tmp / "daemon.log").read_text())[-2000:],
    }


def main(argv: list[str] | None = None) -> None:
    from bench.dagster_paths_ui import start_webserver, ui_pages

    args = parse(__doc__.splitlines()[0], argv)
    size = size_of(args)
    n, duration, px = SIZES[size]
    result: dict[str, Any] = {"size": size}
    t0 = time.perf_counter()
    # a harness's SIGTERM (its timeout) ends the bench through its `finally`s: the servers are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="bench-dagster-paths-") as d:
        u = User(Path(d))
        homes = [u.home]
        try:
            result["preview_warnings"] = load_warnings(u)
            result["definitions_import_s"] = definitions_import_s(3, cwd=Path(d))
            wheel_dir = Path(d) / "wheel"
            wheel_dir.mkdir()
            result["wheel_load_ok"], wheel_detail = load_from_wheel(build_wheel(wheel_dir), Path(d) / "from-wheel")
            if not result["wheel_load_ok"]:
                result["wheel_errors"] = wheel_detail
            u.init_instance()
            result.update(user_paths(u, n, duration, px, start_webserver, ui_pages))
            result.update(automation(Path(d) / "automation", size, (n, duration, px), User))
            homes.append(Path(result["automation_home"]))
            result.update(injected_timeout(Path(d) / "injected"))
        finally:
            u.stop_all()
        left = counted(homes, wait_s=procs.GRACE_S + 10)
        result["processes_left"] = len(left) + int(result.get("injected_left", 0))
        result["cli_superseded_warnings"] = u.superseded
        warnings = u.warnings + result.pop("automation_warnings", [])
        result["cli_warnings"], result["cli_warning_lines"] = len(warnings), warnings[:5]
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    emit(result)


def user_paths(u: User, n: int, duration: float, px: int, start_webserver: Any, ui_pages: Any) -> dict[str, Any]:
    """The README's three paths on one instance: the CLI, the daemon with the landing sensor, the UI."""
    # The daemon path is mostly waiting (sensor ticks, run start-up): its first batch runs
    # alongside the CLI paths, on the same instance, as a deployment would, and its second
    # once they are done (see daemon_sensor); the webserver starts meanwhile too.
    result: dict[str, Any] = {}
    daemon: dict[str, Any] = {}
    cli_done = threading.Event()
    thread = threading.Thread(target=lambda: daemon.update(daemon_sensor(u, n, duration, px, cli_done)), daemon=True)
    thread.start()
    web = start_webserver(u)
    try:
        try:
            result.update(cli_materialize(u, n, duration, px))
            result.update(lineage(u))
        finally:
            cli_done.set()
        thread.join()
        result.update(daemon)
        result["run_kind_tagged_on_cli_path"] = cli_run_kinds(u)
        result.update(vocabulary(u))
        result.update(ui_pages(u, web, n_batches=3))
    finally:
        stop(web[0])
    return result


if __name__ == "__main__":
    main()
