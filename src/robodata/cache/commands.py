"""`robodata cache-stats ROOT` and `robodata cache-reconcile ROOT`: inspect / repair a node page cache."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer


def register(app: typer.Typer) -> None:
    app.command("cache-stats")(cache_stats)
    app.command("cache-reconcile")(cache_reconcile)


def _open(root: str, page_size: int):
    """Open an existing page cache; a path that holds none is an error (never a new, empty cache)."""
    from pathlib import Path

    from robodata.cache import PageCache, PageCacheConfig

    if not Path(root).is_dir():
        typer.echo(f"error: {root}: no page cache there (not a directory)", err=True)
        raise typer.Exit(2)

    return PageCache(PageCacheConfig(root=root, page_size=page_size, budget_bytes=max(page_size, 1 << 40)))


def cache_stats(
    root: str = typer.Argument(..., help="page cache directory"),
    page_size: int = typer.Option(1 << 20, help="page size the cache was created with"),
) -> None:
    """Print node-wide counters (hits, misses, bytes fetched, evictions, resident bytes) as JSON."""
    typer.echo(json.dumps(asdict(_open(root, page_size).stats()), sort_keys=True))


def cache_reconcile(
    root: str = typer.Argument(..., help="page cache directory"),
    page_size: int = typer.Option(1 << 20, help="page size the cache was created with"),
    grace_s: float = typer.Option(60.0, help="leave files younger than this alone"),
) -> None:
    """Remove temp leftovers and orphan pages after crashes; fix the resident byte count."""
    typer.echo(json.dumps(_open(root, page_size).reconcile(grace_s), sort_keys=True))
