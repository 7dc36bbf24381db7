"""`robodata curate SPEC` and `robodata export --format lerobot|mcap MANIFEST DIR`."""

from __future__ import annotations

import json
import os

import typer
from rich.console import Console

from robodata.errors import RobodataError
from robodata.storage import StateRoot


def register(app: typer.Typer) -> None:
    app.command("curate")(curate_cmd)
    app.command("export")(export_cmd)


def default_catalog() -> str:
    """$ROBODATA_CATALOG, else the catalog under $ROBODATA_STORAGE_ROOT (where ingestion writes it), else ""."""
    if os.environ.get("ROBODATA_CATALOG"):
        return os.environ["ROBODATA_CATALOG"]
    root = os.environ.get("ROBODATA_STORAGE_ROOT", "")
    return StateRoot(root).catalog if root else ""


def curate_cmd(
    spec: str = typer.Argument(..., help="curation spec (YAML)"),
    catalog: str = typer.Option(
        "",
        "--catalog",
        help="catalog Delta table URI (default $ROBODATA_CATALOG, else $ROBODATA_STORAGE_ROOT/catalog/episodes)",
    ),
    out: str = typer.Option(
        "", "--out", help="directory for the manifest file (default $ROBODATA_STORAGE_ROOT/manifests, else manifests)"
    ),
    catalog_version: int = typer.Option(-1, "--catalog-version", help="catalog version (default: spec pin or latest)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as one JSON line"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
) -> None:
    """Evaluate a curation spec over the catalog and write its immutable manifest."""
    from robodata.catalog.table import CatalogConfig
    from robodata.curate.run import curate
    from robodata.storage import StorageLocation

    console = Console(stderr=True)
    catalog = catalog or default_catalog()
    if not out:  # where the `manifest` asset writes them, under the state root
        root = os.environ.get("ROBODATA_STORAGE_ROOT", "")
        out = StateRoot(root).manifests if root else "manifests"
    if not catalog:
        console.print("[red]error:[/red] no catalog: pass --catalog, or set ROBODATA_CATALOG or ROBODATA_STORAGE_ROOT")
        raise typer.Exit(2)
    try:
        # s3:// catalog / --out: endpoint and credentials from the AWS_* variables, as ingestion
        cat = CatalogConfig(uri=catalog, storage_options=StorageLocation.from_env(catalog).delta_options())
        from robodata.progress import progress

        # one step: select + write is one call; the line/bar shows it is alive and how long it took
        with progress("curate", 1, "manifests", quiet=quiet) as step:
            info, selection = curate(
                spec,
                cat,
                out,
                catalog_version=None if catalog_version < 0 else catalog_version,
                storage_options=StorageLocation.from_env(out).fsspec_options(),
            )
            step(1)
    except RobodataError as exc:
        console.print(f"[red]{type(exc).__name__}:[/red] {exc}")
        raise typer.Exit(2) from None
    if info.episodes == 0:
        console.print(f"[yellow]warning:[/yellow] spec {spec} selects no episodes; the manifest is empty")
    result = {
        "manifest": str(info.path),
        "content_hash": info.content_hash,
        "spec_hash": info.spec_hash,
        "catalog_version": info.catalog_version,
        "episodes": info.episodes,
        "hours": round(info.hours, 3),
        "train": info.train_episodes,
        "val": info.val_episodes,
        "groups": selection.groups,
        "evaluated_by": selection.evaluated_by,
    }
    if as_json:
        print(json.dumps(result, sort_keys=True))
    else:
        console.print(
            f"[green]{info.path}[/green] {info.episodes} episodes, {info.hours:.1f} h "
            f"(train {info.train_episodes}, val {info.val_episodes}), catalog v{info.catalog_version}"
        )
        print(info.path)


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
