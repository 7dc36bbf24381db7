"""`robodata advise READPATTERN` and `robodata relayout`."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import typer

from robodata.errors import ConfigError, RobodataError


def register(app: typer.Typer) -> None:
    app.command("advise")(advise_cmd)
    app.command("relayout")(relayout_cmd)


def advise_cmd(
    pattern: list[str] = typer.Argument(
        ...,
        help="read pattern(s): preset (wam, vla) or a YAML/JSON ReadPattern file, each optionally PATTERN:WEIGHT "
        "(its share of the reads); several patterns get one layout for all (one copy for ingest --plan)",
    ),
    episodes: list[str] = typer.Option([], "--episodes", "-e", help="sample containers (paths, dirs, globs, URLs)"),
    source: list[str] = typer.Option(
        [],
        "--source",
        "-s",
        help="sample recordings (a landing zone or items in one, any importer's): converted once near-lossless, "
        "so the quality floor is measured against source frames (for new data; -e for data already stored)",
    ),
    topics: str = typer.Option("", "--topics", help="--source: YAML topic rules for MCAP / bags (as ingest)"),
    msgs: str = typer.Option("", "--msgs", help="--source: .msg / .idl definitions the bags do not embed"),
    key_map: str = typer.Option("", "--key-map", help="--source: YAML key maps for HDF5 / Zarr / RLDS"),
    catalog: str | None = typer.Option(None, help="sample episodes from this Delta catalog instead"),
    sample: int = typer.Option(4, help="episodes to sample from the catalog or the --source items"),
    config: Path | None = typer.Option(None, help="AdvisorConfig YAML"),
    out: Path | None = typer.Option(None, help="write the LayoutPlan JSON here"),
    quick: bool = typer.Option(False, help="smaller search and fewer measurements"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
) -> None:
    """Choose GOP, CRF, chunk spans, groups and cache page size for a read pattern (or one layout for
    several, `robodata advise vla:1 wam:1`); print the choice
    with the predicted and measured cost of the top alternatives. Over --source recordings the plan
    is for `robodata ingest --plan` (one encode); over -e / --catalog containers, for relayout."""
    from rich.console import Console
    from rich.table import Table

    from robodata.config import load_yaml
    from robodata.container import EpisodeReader
    from robodata.layout.advisor import advise
    from robodata.layout.config import AdvisorConfig
    from robodata.layout.inputs import expand_episodes, resolve_pattern, sample_catalog, weighted_spec
    from robodata.layout.sources import containers_reference, convert_sources

    console = Console()
    scratch = tempfile.TemporaryDirectory(prefix="robodata-advise-")
    try:
        if sum(map(bool, (source, episodes, catalog))) != 1:
            raise ConfigError("advise: give exactly one of --source, --episodes/-e, --catalog")
        cfg = load_yaml(AdvisorConfig, config) if config else AdvisorConfig()
        if quick:
            cfg = dataclasses.replace(
                cfg, samples=min(cfg.samples, 16), rounds=1, verify_top=min(cfg.verify_top, 2), measure_episodes=1
            )
        if source:
            console.print(f"[dim]converting --source recordings near-lossless into {scratch.name}[/dim]")
            from robodata.ingest.settings import IngestSettings

            opts = IngestSettings(topics_file=topics, msgs=msgs, key_map=key_map).import_options
            uris, reference = convert_sources(source, scratch.name, sample, cfg.seed, options=opts)
        else:
            uris = sample_catalog(catalog, sample, cfg.seed) if catalog else expand_episodes(episodes)
            reference = containers_reference(uris)
        first = EpisodeReader.open(uris[0])
        mix = [(resolve_pattern(spec, first.meta), weight) for spec, weight in map(weighted_spec, pattern)]
        first.close()
        from robodata.progress import progress

        with progress("advise", None, "steps", quiet=quiet) as step:
            plan = advise(mix, uris, cfg, log=lambda s: console.print(f"[dim]{s}[/dim]"), progress=step)
        plan.quality_reference = reference
    except (ConfigError, RobodataError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    finally:
        scratch.cleanup()
    t = Table("", "alternative", "predicted ms", "measured ms", "frames dec.", "bytes/sample", "storage x")
    for a in plan.alternatives:
        t.add_row(
            "*" if a["label"] == plan.chosen else "",
            a["label"],
            f"{a['predicted_ms']:.3f}",
            f"{a['measured_ms']:.3f}" if "measured_ms" in a else "-",
            f"{a['predicted_frames_decoded']:.1f}",
            str(a["predicted_bytes"]),
            f"{a['storage_x']:.2f}",
        )
    console.print(t)
    console.print(f"quality floor measured against: {reference['measured_against']}")
    for p in plan.patterns:  # one layout for several patterns: each against its own best
        got = ", ".join(f"{k} {p[k]:.2f}" for k in ("of_best_predicted", "of_best_measured") if k in p)
        console.print(f"  pattern {p['name']} (weight {p['weight']:.2f}): {got}")
    console.print(f"chosen: [bold]{plan.chosen}[/bold]  layout_version={plan.version}  page_size={plan.page_size}")
    for g in plan.layout.groups:
        v = g.video
        settings = f"gop={v.gop} bframes={v.bframes} crf={v.crf} {v.codec}/{v.preset}/{v.entropy}" if v else ""
        settings += "" if not v or v.deblock else "/nodeblock"
        console.print(f"  group {g.name}: {', '.join(g.streams)}  chunk_span={g.chunk_span_s:g}s {settings}")
    if out:
        plan.save(out)
        console.print(f"plan written to {out}")


def relayout_cmd(
    catalog: str = typer.Option(..., help="Delta catalog uri"),
    plan: Path = typer.Option(..., help="LayoutPlan JSON from `robodata advise --out`"),
    day: list[str] = typer.Option(..., "--day", help="catalog partition(s) to re-lay"),
    max_episodes: int = typer.Option(0, help="stop after this many episodes per day (0: all)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
) -> None:
    """Re-lay catalog partitions into a plan's layout (new versions beside the old, then pointer flip)."""
    import json

    from robodata.layout.relayout import RelayoutConfig, relayout_partition

    try:
        cfg = RelayoutConfig(catalog_uri=catalog, plan_path=str(plan), max_episodes=max_episodes)
        from robodata.progress import progress

        for d in day:
            with progress(f"relayout {d}", max_episodes or None, "episodes", quiet=quiet) as step:
                rep = relayout_partition(d, cfg, log=lambda s: typer.echo(s, err=True), progress=step)
            typer.echo(json.dumps(rep.as_dict()))
    except (ConfigError, RobodataError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
