"""`robodata train CONFIG` and `robodata lineage CHECKPOINT`."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from robodata.errors import RobodataError
from robodata.train.config import apply_overrides, load_with_overrides

__all__ = ["apply_overrides", "load_with_overrides", "register"]


def register(app: typer.Typer) -> None:
    app.command("train")(train)
    app.command("lineage")(lineage)


def train(
    config: str = typer.Argument(..., help="training config YAML"),
    set_: list[str] = typer.Option(None, "--set", help="override, e.g. --set topology.nodes=1 (repeatable)"),
) -> None:
    """Train (or resume, from the newest complete checkpoint in run_dir) and print the result."""
    from robodata.train.launch import train as run

    console = Console(stderr=True)
    try:
        cfg = load_with_overrides(config, set_)
        result = run(cfg, fresh_process=True)
    except RobodataError as exc:
        console.print(f"[red]{type(exc).__name__}:[/red] {exc}")
        raise typer.Exit(2) from None
    print(json.dumps({k: v for k, v in result.items() if k != "ranks"}, default=str))
    if not result["complete"]:
        console.print(f"stopped at step {result['step']} of {result['steps']}; rerun to resume")
        raise typer.Exit(3)


def lineage(
    checkpoint: str = typer.Argument(..., help="checkpoint dir, or a run dir (newest complete checkpoint)"),
    as_json: bool = typer.Option(False, "--json", help="print the whole meta.json"),
    episodes: bool = typer.Option(
        False,
        "--episodes",
        help=(
            "list the episodes of the training split the checkpoint's manifest holds (TSV): id, split, container, "
            "the container object's whole byte range and its footer's; not the windows the sampler read"
        ),
    ),
) -> None:
    """Print the data and code a checkpoint was trained on."""
    from robodata.train.lineage import LINEAGE_KEYS, byte_ranges, read_checkpoint_meta, trained_episodes

    console = Console()
    try:
        meta = read_checkpoint_meta(checkpoint)
        if episodes:
            typer.echo(
                "# the training split's episodes and their whole container objects "
                "(the sampler read windows within them, not all of these bytes)",
                err=True,
            )
            print("episode_id\tsplit\turi\tobject_bytes\tfooter_bytes")
            for row in trained_episodes(meta):
                whole, footer = byte_ranges(row)
                print(f"{row['episode_id']}\t{row['split']}\t{row['uri']}\t{whole}\t{footer}")
            return
    except RobodataError as exc:
        console.print(f"[red]{type(exc).__name__}:[/red] {exc}")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(meta, indent=1, default=str))
        return
    lin = meta.get("lineage", {})
    print(f"checkpoint: {meta['checkpoint']}")
    print(f"step: {meta.get('step')}")
    for key in LINEAGE_KEYS:
        value = lin.get(key)
        print(f"{key}: {json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value}")
    gp = meta.get("goodput", {})
    if gp:
        print(
            "goodput: "
            + " ".join(f"{k}={gp[k]}" for k in ("goodput", "data_wait_fraction", "restarts", "lost_steps") if k in gp)
        )
