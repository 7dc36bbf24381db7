"""`robodata curate SPEC`."""

from __future__ import annotations

import json
import os

import typer
from rich.console import Console

from robodata.errors import RobodataError
from robodata.storage import StateRoot


def register(app: typer.Typer) -> None:
    app.command("curate")(curate_cmd)


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
