"""`robodata upload run|once|status`: the edge uploader's command line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import typer

from robodata.errors import ConfigError, RobodataError

upload_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Upload finished episodes from a local spool to S3; delete only after verification.",
)


def register(app: typer.Typer) -> None:
    app.add_typer(upload_app, name="upload")


def _config(config: Path | None, **overrides: Any):
    import yaml

    from robodata.config import from_dict
    from robodata.upload.config import UploadConfig

    data: dict[str, Any] = {}
    if config is not None:
        try:
            data = yaml.safe_load(config.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise typer.BadParameter(f"cannot read config {config}: {exc}") from None
        if not isinstance(data, dict):
            raise typer.BadParameter(f"{config}: expected a mapping at top level")
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return from_dict(UploadConfig, data, path=config.name if config else "upload")
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None


CONFIG = typer.Option(None, "--config", "-c", help="YAML file with UploadConfig fields")
SPOOL = typer.Option(None, help="local spool directory")
BUCKET = typer.Option(None)
PREFIX = typer.Option(None, "--site-prefix", help="key prefix of this site, e.g. landing/site-a")
ENDPOINT = typer.Option(None, "--endpoint-url", help="S3-compatible endpoint (default: AWS)")
BANDWIDTH = typer.Option(None, "--bandwidth", help="cap in bytes/s")
COMPLETION = typer.Option(None, help="rename (<name>.partial -> <name>) or marker (<name>.done)")


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


@upload_app.command("run")
def run_cmd(
    config: Path | None = CONFIG,
    spool: str | None = SPOOL,
    bucket: str | None = BUCKET,
    site_prefix: str | None = PREFIX,
    endpoint_url: str | None = ENDPOINT,
    bandwidth: float | None = BANDWIDTH,
    completion: str | None = COMPLETION,
    verbose: bool = typer.Option(True, "--verbose/--quiet"),
) -> None:
    """Daemon: upload whatever becomes ready, forever; status.json + metrics.prom in the state dir."""
    from robodata.upload.daemon import run_daemon

    cfg = _config(
        config,
        spool=spool,
        bucket=bucket,
        site_prefix=site_prefix,
        endpoint_url=endpoint_url,
        bandwidth_bytes_per_s=bandwidth,
        completion=completion,
    )
    _logging(verbose)
    try:
        raise typer.Exit(run_daemon(cfg))
    except RobodataError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@upload_app.command("once")
def once_cmd(
    config: Path | None = CONFIG,
    spool: str | None = SPOOL,
    bucket: str | None = BUCKET,
    site_prefix: str | None = PREFIX,
    endpoint_url: str | None = ENDPOINT,
    bandwidth: float | None = BANDWIDTH,
    completion: str | None = COMPLETION,
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output (as --no-progress)"),
) -> None:
    """One pass with progress (a bar on a terminal, else periodic lines); exit 0 only if every
    ready episode was uploaded, verified, deleted."""
    from robodata.progress import progress as reporter
    from robodata.upload.daemon import run_once

    cfg = _config(
        config,
        spool=spool,
        bucket=bucket,
        site_prefix=site_prefix,
        endpoint_url=endpoint_url,
        bandwidth_bytes_per_s=bandwidth,
        completion=completion,
    )
    _logging(False)
    try:
        with reporter("upload", None, "B", quiet=quiet or not progress) as bar:
            outcomes = run_once(cfg, on_total=bar.set_total, on_bytes=bar)
    except RobodataError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(outcomes, sort_keys=True))
    if set(outcomes) - {"uploaded", "gone"}:
        raise typer.Exit(1)


@upload_app.command("status")
def status_cmd(
    config: Path | None = CONFIG,
    spool: str | None = SPOOL,
    bucket: str | None = BUCKET,
    site_prefix: str | None = PREFIX,
    fmt: str = typer.Option("json", "--format", help="json or prometheus"),
) -> None:
    """Counters, ready/open/rejected episodes, read from the journal (safe while the daemon runs)."""
    from robodata.upload.journal import Journal
    from robodata.upload.spool import entries_in, held_in, ready_names
    from robodata.upload.status import collect, prometheus

    cfg = _config(config, spool=spool, bucket=bucket or "unset", site_prefix=site_prefix or "unset")
    journal_path = cfg.state_path / "journal.sqlite"
    if not journal_path.exists():
        typer.echo(f"error: no journal at {journal_path} (has the uploader run on this spool?)", err=True)
        raise typer.Exit(2)
    journal = Journal(journal_path)
    try:
        in_trash = entries_in(cfg.trash_path)
        ready = ready_names(Path(cfg.spool), cfg.completion, cfg.min_age_s)
        st = collect(journal, ready, held_in(in_trash, cfg.held_path), in_trash)
    finally:
        journal.close()
    typer.echo(prometheus(st) if fmt == "prometheus" else json.dumps(st, indent=1, sort_keys=True))
