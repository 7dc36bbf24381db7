"""`robodata catalog optimize`: compaction in the budget order (robodata.catalog.maintenance)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import typer
from rich.console import Console

from robodata.errors import RobodataError

catalog_app = typer.Typer(no_args_is_help=True, help="catalog maintenance")


def register(app: typer.Typer) -> None:
    app.add_typer(catalog_app, name="catalog")


@catalog_app.command("optimize")
def optimize_cmd(
    catalog: str = typer.Option(
        os.environ.get("ROBODATA_CATALOG", ""), "--catalog", help="catalog Delta table URI (default $ROBODATA_CATALOG)"
    ),
    day: list[str] = typer.Option([], "--day", help="a day (YYYY-MM-DD) to rewrite; repeat for more"),
    recent: int = typer.Option(0, "--recent", help="rewrite the last N UTC days (0: --day, else every day)"),
    row_group_rows: int | None = typer.Option(
        None, "--row-group-rows", help="rows per Parquet row group, at most (default: OptimizeConfig's, 2Ki)"
    ),
    compression: str = typer.Option(
        "LZ4_RAW", "--compression", help="Parquet codec: LZ4_RAW, ZSTD, SNAPPY, UNCOMPRESSED"
    ),
    split_salt: str | None = typer.Option(
        None,
        "--split-salt",
        help="split.salt of the specs this catalog mostly serves (its budget order; default: keep)",
    ),
) -> None:
    """Compact catalog days in the budget order (budget_hash); prints metrics as JSON."""
    from robodata.catalog.maintenance import OptimizeConfig, optimize
    from robodata.catalog.table import Catalog, CatalogConfig
    from robodata.storage import StorageLocation

    console = Console(stderr=True)
    if not catalog:
        console.print("[red]error:[/red] no catalog: pass --catalog or set ROBODATA_CATALOG")
        raise typer.Exit(2)
    days = list(day)
    if recent > 0:
        today = datetime.now(UTC).date()
        days += [(today - timedelta(days=k)).isoformat() for k in range(recent)]
    try:
        config = OptimizeConfig(compression=compression, split_salt=split_salt)
        if row_group_rows is not None:
            config = replace(config, row_group_rows=row_group_rows)  # checked again
        cat = Catalog(CatalogConfig(uri=catalog, storage_options=StorageLocation.from_env(catalog).delta_options()))
        metrics = optimize(cat, sorted(set(days)) or None, config)
    except RobodataError as exc:
        console.print(f"[red]{type(exc).__name__}:[/red] {exc}")
        raise typer.Exit(2) from None
    print(json.dumps(metrics, sort_keys=True, default=str))
