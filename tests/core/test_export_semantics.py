"""Issue 24: LeRobot export of episodes whose measured rates differ slightly (29.93-30.02 Hz) succeeds
on the nominal grid; every episode is validated before anything is written; a failure leaves nothing."""

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
    write_small(path, duration_s=2.0, fps=fps, h=32, w=32)
    r = EpisodeReader.open(path)
    return {"episode_id": eid, "uri": str(path), "task": "t", "footer_offset": r.footer_offset,
            "footer_length": r.footer_length, "split": "train"}  # fmt: skip


def test_rates_within_tolerance_export_on_the_nominal_grid(tmp_path):
    rows = [_row(tmp_path / f"e{i}.rdep", f"e{i}", fps) for i, fps in enumerate((29.93, 30.02, 30.0))]
    out = tmp_path / "lr"
    res = export_lerobot(rows, out)
    assert res["fps"] == 30.0 and res["episodes"] == 3
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["fps"] == 30.0 and info["total_frames"] == res["frames"]
    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet").to_pydict()
    for ep in range(3):
        ts = [t for t, e in zip(data["timestamp"], data["episode_index"], strict=True) if e == ep]
        assert abs(ts[1] - ts[0] - 1 / 30) < 1e-6 and 59 <= len(ts) <= 61  # the 30 Hz grid over 2 s
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
    monkeypatch.setattr(lr, "_write_tasks", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        export_lerobot(rows, tmp_path / "lr")
    assert not (tmp_path / "lr").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".lr")]


def test_nominal_rate():
    assert nominal_rate([29.93, 30.02]) == 30.0 and nominal_rate([12.5]) == 12.5 and nominal_rate([9.99]) == 10.0


def test_the_grid_holds_a_slower_cameras_last_frame_to_the_end(tmp_path):
    """The demo's case: a 10 s episode exported at 30 Hz whose wrist camera runs at 10 Hz and whose
    last frame is at 9.9 s: the grid time 10.0 s (and the window around it) holds that frame."""
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
    reader = SimpleNamespace(meta=SimpleNamespace(duration_s=10.0, episode_id="e", streams=streams))
    reader.read_window = read_window
    ep = EpisodeStreams(reader, ["main", "wrist"], None, None, 30.0)  # type: ignore[arg-type]
    got = list(frames(ep, grid_fps=30.0))
    grid = np.concatenate([g for g, _ in got])
    wrist = np.concatenate([o["wrist"].ravel() for _, o in got])
    assert len(grid) == 301 and grid[-1] == 10.0
    assert wrist[-1] == 990  # 9.9 s held at 10.0 s
    assert np.all(np.abs(wrist / 100 - grid) <= 0.1 + 1e-9)  # every frame within a wrist period
