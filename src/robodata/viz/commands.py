"""`robodata view`: an episode, a manifest row or one loader sample in Rerun."""

from __future__ import annotations

import json
import os
from typing import Any

import typer

from robodata.errors import RobodataError


def register(app: typer.Typer) -> None:
    app.command("view")(view_cmd)


class ViewerUnavailable(RobodataError):
    """`--spawn` cannot start a Rerun viewer here (no display, or no viewer executable)."""


NO_VIEWER = "use --save ep.rrd and open it where there is one (`rerun ep.rrd`), or --connect to a running viewer"


def _spawn(rec: Any) -> None:
    linux = os.name == "posix" and os.uname().sysname == "Linux"
    if linux and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ViewerUnavailable(f"--spawn needs a display (DISPLAY and WAYLAND_DISPLAY are unset): {NO_VIEWER}")
    try:
        rec.spawn()
    except RuntimeError as exc:  # rerun: no viewer executable on PATH, or it did not start
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ViewerUnavailable(f"--spawn could not start the Rerun viewer ({first}): {NO_VIEWER}") from exc


def _sink(rec: Any, save: str | None, spawn: bool, connect: str | None) -> None:
    if sum(x is not None and x is not False for x in (save, connect)) + int(spawn) != 1:
        raise typer.BadParameter("give exactly one of --save OUT.rrd, --spawn, --connect ADDR")
    if save:
        rec.save(save)
    elif spawn:
        _spawn(rec)
    else:
        rec.connect_grpc(connect)


def view_cmd(
    target: str = typer.Argument(
        ..., help="an episode container (path or URL), or a manifest with --index/--episode/--sample"
    ),
    index: int | None = typer.Option(None, help="manifest row to show"),
    episode: str | None = typer.Option(None, help="episode_id of the manifest row to show"),
    sample: int | None = typer.Option(None, help="show the sample at this position of the loader's order"),
    pattern: str = typer.Option("wam", help="read pattern preset the sample is drawn under (wam | vla)"),
    seed: int = typer.Option(0, help="sampler seed (as in training)"),
    shuffle: str = typer.Option("global", help="sampler shuffle: global | block | none"),
    split: str = typer.Option("train", help="manifest split the loader reads ('' for all rows)"),
    start: float = typer.Option(0.0, help="first second of the episode to show"),
    end: float = typer.Option(float("inf"), help="last second of the episode to show"),
    root: str | None = typer.Option(
        None, help="storage root whose qc_results to annotate (default $ROBODATA_STORAGE_ROOT, if set)"
    ),
    save: str | None = typer.Option(None, help="write the recording to this .rrd file"),
    spawn: bool = typer.Option(False, help="spawn a Rerun viewer and stream to it"),
    connect: str | None = typer.Option(None, help="stream to a running viewer, e.g. rerun+http://127.0.0.1:9876/proxy"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
) -> None:
    """Look at an episode in Rerun: its cameras (the stored video, not re-encoded), joint and
    command streams, events and QC verdicts; or exactly what the loader returns for one sample."""
    try:
        import rerun as rr
    except ImportError:
        typer.echo("error: `robodata view` needs rerun-sdk: pip install 'robodata[viz]'", err=True)
        raise typer.Exit(2) from None
    from robodata.container import EpisodeReader
    from robodata.progress import progress
    from robodata.viz.qc import read_qc
    from robodata.viz.record import log_episode
    from robodata.viz.sample import log_sample
    from robodata.viz.select import SampleSpec, draw_sample, open_row

    qc_root = root if root is not None else os.environ.get("ROBODATA_STORAGE_ROOT")
    try:
        drawn = None
        if sample is not None:
            spec = SampleSpec(pattern, sample, seed, 0, shuffle, split or None)
            drawn = draw_sample(target, spec)
            reader = drawn.reader
        elif index is not None or episode is not None:
            reader = open_row(target, index, episode)
        else:
            reader = EpisodeReader.open(target)
        eid = reader.meta.episode_id
        qc = read_qc(qc_root, eid) if qc_root else []
        rec = rr.RecordingStream("robodata", recording_id=eid)
        _sink(rec, save, spawn, connect)
        if drawn is not None:
            stats = log_sample(drawn, rec, qc)
        else:
            from robodata.viz.record import EpisodeLogger

            n = len(EpisodeLogger(reader, rec).chunks(start, end))
            with progress("view", n, "chunks", quiet=quiet) as step:
                stats = log_episode(reader, rec, t0=start, t1=end, qc=qc, progress=step)
        rec.flush()
        if save:
            rec.disconnect()
    except (RobodataError, OSError) as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    out = {
        "episode_id": eid,
        "frames": stats.frames,
        "scalars": stats.scalars,
        "events": stats.events,
        "qc_annotations": stats.qc_annotations,
        "reencoded_frames": stats.reencoded_frames,
        "notes": stats.notes,
        **({"sample": {"row": drawn.row, "t": drawn.t, "window": list(drawn.window)}} if drawn else {}),
        **({"saved": save} if save else {}),
    }
    typer.echo(json.dumps(out))
