"""`robodata health check|show` (`robodata health repair` is the cluster's: robodata.cluster.commands)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from robodata.errors import ConfigError

health_app = typer.Typer(no_args_is_help=True, help="Node preflight (healthy vs assignable) and scheduler repair.")
EXIT_EXCLUDED = 3


def register(app: typer.Typer) -> None:
    app.add_typer(health_app, name="health")


@health_app.command("check")
def check(
    node: str | None = typer.Option(None, help="node name to record (default: hostname)"),
    table: str | None = typer.Option(None, help="node-health Delta table to append the result to"),
    config: Path | None = typer.Option(None, help="HealthConfig YAML"),
    nvml_backend: str | None = typer.Option(
        None, help="an NVML backend registered under this name (entry points robodata.nvml_backends; default pynvml)"
    ),
    nvml_spec: Path | None = typer.Option(
        None, help="the named backend's spec file (the `fake` backend: a JSON of GPUs)"
    ),
    probes: bool = typer.Option(True, help="run the matmul and gloo all-reduce probes"),
    as_json: bool = typer.Option(False, "--json", help="print the result row as JSON"),
    every: float | None = typer.Option(None, help="repeat every N seconds (DaemonSet mode; needs --table)"),
    times: int | None = typer.Option(None, help="with --every: stop after this many checks"),
) -> None:
    """Run the preflight on this node. Exit code 3 when the node is not assignable (one-shot mode)."""
    from robodata.config import load_yaml
    from robodata.health.config import HealthConfig
    from robodata.health.nvml_backend import named_backend
    from robodata.health.preflight import run_preflight
    from robodata.health.store import write_results

    try:
        cfg = load_yaml(HealthConfig, config) if config else HealthConfig()
        nvml = named_backend(nvml_backend, nvml_spec) if nvml_backend else None
    except (ConfigError, OSError, json.JSONDecodeError) as exc:
        raise typer.BadParameter(str(exc)) from None
    if every is not None and (every <= 0 or not table):
        raise typer.BadParameter("--every needs a positive number of seconds and --table")
    done = 0
    while True:
        result = run_preflight(cfg, node=node, nvml=nvml, probes=probes)
        if table:
            write_results(table, [result])
        _print(result, as_json)
        done += 1
        if every is None:
            break
        if times is not None and done >= times:
            return
        time.sleep(every)
    if not result.verdict.assignable:
        raise typer.Exit(EXIT_EXCLUDED)


def _print(result: Any, as_json: bool) -> None:
    v = result.verdict
    if as_json:
        row = result.to_row()
        row["checked_at"] = row["checked_at"].isoformat()
        typer.echo(json.dumps(row, sort_keys=True))
    else:
        typer.echo(
            f"{v.node}: healthy={v.healthy} assignable={v.assignable} ({len(result.gpus)} GPUs, {result.seconds:.1f}s)"
        )
        for reason in v.reasons():
            typer.echo(f"  - {reason}")


@health_app.command("show")
def show(
    table: str = typer.Argument(..., help="node-health Delta table"),
    max_age_s: float | None = typer.Option(None, help="ignore records older than this"),
) -> None:
    """Newest verdict per node; excluded nodes with their reasons."""
    from datetime import timedelta

    from robodata.health.store import latest_by_node

    latest = latest_by_node(table, max_age=timedelta(seconds=max_age_s) if max_age_s else None)
    for name, row in sorted(latest.items()):
        state = "assignable" if row["assignable"] else "EXCLUDED"
        typer.echo(f"{name}\t{state}\thealthy={row['healthy']}\t{row['checked_at'].isoformat()}")
        for reason in row["exclusion_reasons"] or []:
            typer.echo(f"  - {reason}")
