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


@app.command()
def specs(
    curation_dir: str = typer.Option("specs/curation", help="curation specs: <name>.yaml with name: <name>"),
    training_dir: str = typer.Option("specs/training", help="training configs: <name>.yaml"),
) -> None:
    """Add a manifest / training_run partition for every named spec and training config not known yet."""
    import dagster as dg

    from robodata_dagster.lib.registry import CURATION_SPEC, TRAIN_CONFIG, SpecDirs, register

    dirs = SpecDirs(curation_dir=curation_dir, training_dir=training_dir)
    with dg.DagsterInstance.get() as instance:
        added = register(instance, dirs)
        for kind in (CURATION_SPEC, TRAIN_CONFIG):
            for path in dirs.rejected(kind):
                typer.secho(f"skipped {path}: not a valid partition name", fg="yellow", err=True)
            known = instance.get_dynamic_partitions(kind)
            typer.echo(f"{kind}: {', '.join(known) or '-'} (added: {', '.join(added[kind]) or 'none'})")


@app.command("add-batch")
def add_batch(
    landing: str = typer.Argument(..., help="landing zone: a folder or s3://bucket/prefix"),
    root: str = typer.Option("", help="state root; empty: ROBODATA_STORAGE_ROOT, else .demo"),
    batch: str = typer.Option("", help="batch name (default: manual-<UTC timestamp>)"),
) -> None:
    """Write a batch manifest for the new landing items and add it as an ingest_batch partition."""
    import dagster as dg

    from robodata_dagster.lib import batches
    from robodata_dagster.lib.env import storage_root

    try:
        with dg.DagsterInstance.get() as instance:
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
    import dagster as dg

    from robodata_dagster.lib.lineage import newest_checkpoint_lineage

    try:
        with dg.DagsterInstance.get() as instance:
            typer.echo(json.dumps(newest_checkpoint_lineage(instance), indent=1))
    except RobodataError as exc:
        _fail(exc)
