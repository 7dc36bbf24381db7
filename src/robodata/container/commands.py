"""CLI commands for this domain (filled in by the foundation work)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    return None
