"""`robodata-dagster`: what a user does to the Dagster instance besides running assets.

    robodata-dagster specs                      # specs/curation/*.yaml, specs/training/*.yaml -> partitions
    robodata-dagster add-batch LANDING          # new landing items -> one ingest_batch partition
    robodata-dagster lineage                    # newest checkpoint -> manifest partition -> catalog version

Dagster adds dynamic partitions from sensors, the UI or the instance API; these commands use the
instance API on $DAGSTER_HOME's instance, with the same functions the sensors and the demo use.
"""

from __future__ import annotations

import json

import typer

from robodata.errors import RobodataError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])


def _fail(exc: RobodataError) -> None:
    typer.secho(f"{type(exc).__name__}: {exc}", fg="red", err=True)
    raise typer.Exit(2)


def _instance():
    """$DAGSTER_HOME's instance; a clear error (exit 2), not a traceback, when it is not set up."""
    import os

    import dagster as dg

    from robodata_dagster.lib.env import setting

    home = setting("DAGSTER_HOME")
    if not home:
        typer.secho(
            "DAGSTER_HOME is not set: these commands act on a Dagster instance. Set it to the instance's "
            "folder (e.g. `export DAGSTER_HOME=$PWD/.dagster_home`, the one `make demo` uses).",
            fg="red",
            err=True,
        )
        raise typer.Exit(2)
    if not os.path.isdir(home):
        typer.secho(f"DAGSTER_HOME={home} is not a folder (create it, with a dagster.yaml)", fg="red", err=True)
        raise typer.Exit(2)
    return dg.DagsterInstance.get()


@app.command()
def specs(
    curation_dir: str = typer.Option("specs/curation", help="curation specs: <name>.yaml with name: <name>"),
    training_dir: str = typer.Option("specs/training", help="training configs: <name>.yaml"),
) -> None:
    """Add a manifest / training_run partition for every valid spec and training config not known yet.

    An invalid file is refused with its error (and no partition, so no run); exit status 1 then."""
    from robodata_dagster.lib.registry import CURATION_SPEC, TRAIN_CONFIG, SpecDirs, register

    dirs = SpecDirs(curation_dir=curation_dir, training_dir=training_dir)
    with _instance() as instance:
        found = register(instance, dirs)
        for path, why in sorted(found.refused.items()):
            typer.secho(f"refused {path}: {why}", fg="red", err=True)
        for kind in (CURATION_SPEC, TRAIN_CONFIG):
            known = instance.get_dynamic_partitions(kind)
            typer.echo(f"{kind}: {', '.join(known) or '-'} (added: {', '.join(found.added[kind]) or 'none'})")
    if found.refused:
        raise typer.Exit(1)


@app.command("add-batch")
def add_batch(
    landing: str = typer.Argument(..., help="landing zone: a folder or s3://bucket/prefix"),
    root: str = typer.Option("", help="state root; empty: ROBODATA_STORAGE_ROOT, else .demo"),
    batch: str = typer.Option("", help="batch name (default: manual-<UTC timestamp>)"),
) -> None:
    """Write a batch manifest for the new landing items and add it as an ingest_batch partition."""
    from robodata_dagster.lib import batches
    from robodata_dagster.lib.env import storage_root

    try:
        with _instance() as instance:
            out = batches.add_batch(instance, storage_root(root), landing, batch or None)
    except RobodataError as exc:
        _fail(exc)
        return
    if out is None:
        typer.echo(f"no new landing items in {landing}")
        return
    typer.echo(f"ingest_batch partition {out[0]}: {out[1]} items")


@app.command()
def lineage() -> None:
    """The newest training_run checkpoint's manifest partition and catalog version, from the event log."""
    from robodata_dagster.lib.lineage import newest_checkpoint_lineage

    try:
        with _instance() as instance:
            typer.echo(json.dumps(newest_checkpoint_lineage(instance), indent=1))
    except RobodataError as exc:
        _fail(exc)
