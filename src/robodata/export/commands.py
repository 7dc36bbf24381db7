"""`robodata export --format lerobot|mcap MANIFEST DIR`."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from robodata.errors import RobodataError


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)


def export_cmd(
    manifest: str = typer.Argument(..., help="manifest Parquet file"),
    out_dir: str = typer.Argument(..., help="output directory"),
    fmt: str = typer.Option(..., "--format", help="lerobot | mcap"),
    split: str = typer.Option("", "--split", help="only this split (train | val)"),
    limit: int = typer.Option(0, "--limit", help="at most this many episodes (0: all)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
) -> None:
    """Export a manifest's episodes as a LeRobot v3.0 dataset or as MCAP files."""
    from robodata.export.run import export

    console = Console(stderr=True)
    try:
        from robodata.progress import progress

        with progress("export", None, "episodes", quiet=quiet) as step:
            summary = export(manifest, out_dir, fmt, split=split or None, limit=limit or None, progress=step)
    except RobodataError as exc:
        console.print(f"[red]{type(exc).__name__}:[/red] {exc}")
        raise typer.Exit(2) from None
    print(json.dumps(summary, sort_keys=True))
