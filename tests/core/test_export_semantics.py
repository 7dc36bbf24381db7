"""Issue 24: LeRobot export of episodes whose measured rates differ slightly (29.93-30.02 Hz) succeeds
at the nominal rate; every episode is validated before anything is written; a failure leaves nothing.
Issue 36: the rows are the container's frames."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from robodata.container import EpisodeReader
from robodata.export.episodes import ExportError
from robodata.export.lerobot import export_lerobot, nominal_rate
from tests.core.helpers_container import write_small


def _row(path: Path, eid: str, fps: float) -> dict:
    write_small(path, duration_s=2.0, fps=fps, h=32, w=32, episode_id=eid)
    r = EpisodeReader.open(path)
    return {"episode_id": eid, "uri": str(path), "task": "t", "footer_offset": r.footer_offset,
            "footer_length": r.footer_length, "split": "train"}  # fmt: skip


def test_rates_within_tolerance_export_at_the_nominal_rate(tmp_path):
    rates = (29.93, 30.02, 30.0)
    rows = [_row(tmp_path / f"e{i}.rdep", f"e{i}", fps) for i, fps in enumerate(rates)]
    rows_of = [int(2.0 * fps) for fps in rates]  # the frames write_small wrote: 59, 60, 60
    out = tmp_path / "lr"
    res = export_lerobot(rows, out)
    assert res["fps"] == 30.0 and res["episodes"] == 3
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["fps"] == 30.0 and info["total_frames"] == res["frames"]
    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet").to_pydict()
    for ep in range(3):
        ts = [t for t, e in zip(data["timestamp"], data["episode_index"], strict=True) if e == ep]
        assert abs(ts[1] - ts[0] - 1 / 30) < 1e-6 and len(ts) == rows_of[ep]  # k / 30 s, the frames written
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".lr")]


@pytest.mark.parametrize("bad", ["missing", "empty_uri", "off_rate"])
def test_a_bad_episode_is_found_before_anything_is_written(tmp_path, bad):
    rows = [_row(tmp_path / "e0.rdep", "e0", 30.0), _row(tmp_path / "e1.rdep", "e1", 20.0 if bad == "off_rate" else 30)]
    if bad == "missing":
        Path(rows[1]["uri"]).unlink()
    if bad == "empty_uri":
        rows[1]["uri"] = ""
    out = tmp_path / "lr"
    with pytest.raises(ExportError, match="'e1'"):
        export_lerobot(rows, out)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".lr")]


def test_a_failure_while_writing_leaves_nothing_behind(tmp_path, monkeypatch):
    import robodata.export.lerobot as lr

    rows = [_row(tmp_path / f"e{i}.rdep", f"e{i}", 30.0) for i in range(2)]
    monkeypatch.setattr(lr, "write_tasks", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        export_lerobot(rows, tmp_path / "lr")
    assert not (tmp_path / "lr").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".lr")]


def test_nominal_rate():
    assert nominal_rate([29.93, 30.02]) == 30.0 and nominal_rate([12.5]) == 12.5 and nominal_rate([9.99]) == 10.0


def test_rows_are_the_reference_cameras_frames_and_a_slower_camera_holds_its_last(tmp_path):
    """A 10 s episode whose main camera has 300 frames at 30 Hz (the last at 9.967 s) and whose wrist
    camera runs at 10 Hz (the last at 9.9 s): the rows are exactly the 300 main frames (the grid over
    the duration gave 301: the last frame twice), each wrist frame the nearest, the last held."""
    from types import SimpleNamespace

    import numpy as np

    from robodata.export.episodes import EpisodeStreams, frames

    rates = {"main": 30.0, "wrist": 10.0}
    times = {c: np.arange(int(10.0 * r)) / r for c, r in rates.items()}  # last frames 9.967 / 9.9 s

    def read_window(t0, t1, streams):
        out = {}
        for c in streams:
            k = (times[c] >= t0) & (times[c] <= t1)
            data = (times[c][k] * 100).round().astype(np.int32).reshape(-1, 1, 1, 1)  # a frame = its time
            out[c] = SimpleNamespace(t=times[c][k], data=data)
        return out

    streams = {c: SimpleNamespace(rate_hz=r) for c, r in rates.items()}
    parts = [SimpleNamespace(stream=c, count=len(t)) for c, t in times.items()]
    reader = SimpleNamespace(meta=SimpleNamespace(duration_s=10.0, episode_id="e", streams=streams))
    reader.read_window, reader.chunks = read_window, [SimpleNamespace(parts=parts)]
    ep = EpisodeStreams(reader, ["main", "wrist"], None, None, 30.0)  # type: ignore[arg-type]
    got = list(frames(ep))
    t = np.concatenate([g for g, _ in got])
    main = np.concatenate([o["main"].ravel() for _, o in got])
    wrist = np.concatenate([o["wrist"].ravel() for _, o in got])
    np.testing.assert_array_equal(t, times["main"])  # every frame once, in order
    np.testing.assert_array_equal(main, (times["main"] * 100).round())
    assert wrist[-1] == 990 and wrist[-2] == 990  # 9.9 s held to the last rows
    assert np.all(np.abs(wrist / 100 - t)[t <= 9.9] <= 0.05 + 1e-9)  # the nearest: within half a wrist period


def test_an_export_without_an_identified_action_is_refused_naming_the_streams(tmp_path):
    """Issue 36: the export wrote the state as the action when no stream was called cmd / action; it
    refuses instead, naming the episode's streams, before anything is written."""
    from tests.core.helpers_hostile import container_with

    row = container_with(tmp_path / "c.rdep", "ep-1", "wrist")  # a camera and joint_pos, no action
    with pytest.raises(ExportError, match=r"'ep-1': field action: .*array streams are \['joint_pos'\]"):
        export_lerobot([row], tmp_path / "lr")
    assert not (tmp_path / "lr").exists()


def test_robot_type_is_the_episodes_own_and_two_are_refused(tmp_path, monkeypatch):
    """info.json's robot_type is the episodes' (the catalog's), not `robodata`; a dataset mixing two
    embodiments is refused naming both episodes."""
    import robodata.export.episodes as episodes

    rows = [_row(tmp_path / f"e{i}.rdep", f"e{i}", 30.0) for i in range(2)]
    assert json.loads(_export(rows, tmp_path / "none"))["robot_type"] is None  # none declared: null, not invented
    opened = episodes.open_episode

    def typed(row, *a):
        ep = opened(row, *a)
        ep.reader.meta.extra["robot_type"] = "so100" if row["uri"].endswith("e1.rdep") else "koch"
        return ep

    monkeypatch.setattr("robodata.export.lerobot.open_episode", typed)
    with pytest.raises(ExportError, match=r"'e1': field robot_type: 'so100' vs episode 'e0''s 'koch'"):
        export_lerobot(rows, tmp_path / "mixed")
    assert json.loads(_export(rows[:1], tmp_path / "one"))["robot_type"] == "koch"


def _export(rows: list[dict], out: Path) -> str:
    export_lerobot(rows, out)
    return (out / "meta" / "info.json").read_text()
