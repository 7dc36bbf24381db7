"""`robodata inspect FILE`: print a container's metadata and chunk index."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from robodata.errors import ContainerError


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)


def inspect(
    path: str = typer.Argument(..., help="container file or URL (s3://...)"),
    as_json: bool = typer.Option(False, "--json", help="print the index as JSON"),
    verify: bool = typer.Option(False, "--verify", help="read and decode every chunk, checking its checksum"),
) -> None:
    """Print the metadata and chunk index of an episode container."""
    from robodata.container import EpisodeReader

    console = Console()
    try:
        r = EpisodeReader.open(path)
        if verify:  # chunk by chunk: memory stays at one chunk's decoded data
            for c in r.chunks:
                r.read_window(c.t_start / 1e9, c.t_end / 1e9, list(c.streams))
    except ContainerError as exc:
        console.print(f"[red]ContainerError:[/red] {exc}")
        raise typer.Exit(2) from None
    except OSError as exc:  # missing file, unreadable object
        console.print(f"[red]error:[/red] {path}: cannot be read ({type(exc).__name__}: {exc})")
        raise typer.Exit(2) from None
    if as_json:
        print(
            json.dumps(
                {
                    "meta": r.meta.to_dict(),
                    "layout_version": r.layout_version,
                    "footer": [r.footer_offset, r.footer_length],
                    "chunks": [c.to_json() for c in r.chunks],
                },
                indent=1,
            )
        )
        return
    m = r.meta
    console.print(f"[bold]{m.episode_id}[/bold]  robot={m.robot} site={m.site} task={m.task} vendor={m.vendor}")
    console.print(
        f"start_time_ns={m.start_time_ns} duration={m.duration_s:.2f}s layout={r.layout_version} "
        f"size={r.source.size()} footer@{r.footer_offset}+{r.footer_length}"
    )
    st = Table("stream", "kind", "group", "rate_hz", "shape", "units")
    for s in m.streams.values():
        st.add_row(s.name, s.kind, r.layout.group_of(s.name).name, f"{s.rate_hz:g}", str(s.shape), s.units)
    console.print(st)
    ct = Table("chunk", "group", "streams", "t_start_s", "t_end_s", "offset", "length", "crc32")
    for c in r.chunks:
        ct.add_row(
            str(c.index),
            c.group,
            ",".join(c.streams),
            f"{c.t_start / 1e9:.3f}",
            f"{c.t_end / 1e9:.3f}",
            str(c.offset),
            str(c.length),
            f"{c.checksum:08x}",
        )
    console.print(ct)
    if verify:
        console.print(f"[green]verified[/green] {r.stats.chunks_read} chunks, {r.stats.bytes_read} bytes")
