"""`robodata synth`, `robodata import-legacy`, `robodata ingest` and `robodata gc`."""

from __future__ import annotations

from pathlib import Path

import typer

from robodata.errors import ConfigError, RobodataError
from robodata.ingest.formats import synth_names


def register(app: typer.Typer) -> None:
    app.command("synth")(synth)
    app.command("import-legacy")(import_legacy_cmd)
    app.command("ingest")(ingest_cmd)
    app.command("gc")(gc_cmd)


def synth(
    root: Path = typer.Argument(..., help="landing directory to write raw episodes into"),
    episodes: int = typer.Option(4),
    duration: float = typer.Option(10.0, help="seconds per episode"),
    cameras: str = typer.Option("cam_left,cam_right,wrist"),
    height: int = typer.Option(480),
    width: int = typer.Option(640),
    fps: float = typer.Option(30.0),
    state_hz: float = typer.Option(100.0),
    fmt: str = typer.Option("jpeg", "--format", help="one of: " + ", ".join(synth_names())),
    site: str = typer.Option("site-a"),
    seed: int = typer.Option(0),
    drop_prob: float = typer.Option(0.0, help="fraction of frames dropped"),
) -> None:
    """Generate synthetic raw recordings in any format robodata ingests (robodata.ingest.formats)."""
    from robodata.ingest.synth import SynthConfig, synthesize

    try:
        cfg = SynthConfig(
            episodes=episodes,
            duration_s=duration,
            cameras=tuple(c for c in cameras.split(",") if c),
            height=height,
            width=width,
            fps=fps,
            state_hz=state_hz,
            format=fmt,
            site=site,
            seed=seed,
            drop_prob=drop_prob,
        )
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    for p in synthesize(cfg, root):
        typer.echo(str(p))


def import_legacy_cmd(episode_dir: Path, out: Path = typer.Argument(..., help="container path to write")) -> None:
    """Convert one legacy JPEG-folder episode into a container."""
    from robodata.ingest.legacy import import_legacy

    try:
        res = import_legacy(episode_dir, out)
    except RobodataError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{res.episode_id} -> {res.path} ({res.bytes_written} bytes, {res.duration_s:.1f}s)")


def ingest_cmd(
    landing: str = typer.Argument(..., help="landing zone: local dir or s3://bucket/prefix"),
    root: str = typer.Option(
        ".demo",
        envvar="ROBODATA_STORAGE_ROOT",
        help="ingest state root (tables, containers, catalog): dir or s3://bucket/prefix",
    ),
    batch: str = typer.Option("", help="batch name (default: a timestamp)"),
    workers: int = typer.Option(1, help="conversion processes (work bins)"),
    topics: str = typer.Option("", "--topics", help="YAML topic rules for MCAP / bags (docs/ingestion.md)"),
    msgs: str = typer.Option("", "--msgs", help="folder of .msg / .idl definitions the bags do not embed"),
    key_map: str = typer.Option("", "--key-map", help="YAML key maps for HDF5 / Zarr / RLDS layouts"),
    plan: str = typer.Option(
        "", "--plan", help="LayoutPlan JSON (`robodata advise --source ... --out`): write episodes in its layout"
    ),
    qc: str = typer.Option("", "--qc", help="YAML QC file: per check run / blocking / thresholds (docs/ingestion.md)"),
    video: str = typer.Option(
        "auto",
        "--video",
        help="copy: keep each source video bitstream that is sound; transcode: always re-encode; auto: copy "
        "where it is also as cheap to read as the layout (docs/ingestion.md)",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
    allow_none: bool = typer.Option(
        False, "--allow-none", help="exit 0 even when items were found and none passed (default: exit 1)"
    ),
) -> None:
    """Ingest everything complete in a landing zone as one batch, without Dagster. With --plan the
    containers are written in the plan's layout (one encode), not the ingestion default. Exits 1
    when the landing zone held items and none of them passed (their reasons are in the output)."""
    import json
    import time

    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.pipeline import run_batch
    from robodata.ingest.settings import IngestSettings
    from robodata.storage.state import StateRoot, check_batch

    try:
        from robodata.ingest.video_copy import VideoCopyConfig

        settings = IngestSettings(
            workers=workers,
            topics_file=topics,
            msgs=msgs,
            key_map=key_map,
            plan=plan,
            qc_file=qc,
            video_copy=VideoCopyConfig(mode=video),
        )
        name = check_batch(batch or time.strftime("cli-%Y%m%dT%H%M%S"))
        state = StateRoot(root)
    except RobodataError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:  # one bad item is quarantined inside run_batch; what reaches here is about the whole run
        items = new_items(landing, LandingCursor())
        write_manifest(state, name, items)
        from robodata.ingest.pipeline import STAGES
        from robodata.progress import progress

        with progress("ingest", STAGES, "stages", quiet=quiet) as step:
            out = run_batch(state, name, settings, progress=step)
    except RobodataError as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        json.dumps(
            {"batch": name, **{k: out[k] for k in ("episodes", "unrecognized", "qc_results", "episode_metadata")}},
            default=str,
        )
    )
    passed = int(out["qc_results"].get("passed", 0))
    if items and not passed and not allow_none:
        typer.echo(
            f"error: {len(items)} landing item(s) found and none passed QC: see qc_results.quarantine_reasons "
            "above (--allow-none exits 0)",
            err=True,
        )
        raise typer.Exit(1)


def gc_cmd(
    root: str = typer.Option(".demo", help="ingest state root (containers, catalog): dir or s3://bucket/prefix"),
    grace_hours: float = typer.Option(24.0, help="leave leftovers younger than this (an ingest may still be writing)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be removed, remove nothing"),
    scratch: str = typer.Option(
        "", help="local scratch folder to sweep (default: ROBODATA_SCRATCH, else the temp dir)"
    ),
    no_scratch: bool = typer.Option(False, "--no-scratch", help="leave the local scratch folder alone"),
) -> None:
    """Remove what killed ingests leave: container objects no catalog row references and
    robodata's scratch folders, older than the grace period; never a referenced container."""
    import json

    from robodata.ingest.sweep import SweepConfig, sweep
    from robodata.ingest.tables import IngestPaths

    try:
        config = SweepConfig(grace_s=grace_hours * 3600.0, dry_run=dry_run, scratch=None if no_scratch else scratch)
        report = sweep(IngestPaths(root), config)
    except RobodataError as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(report.summary(), default=str))
