"""Issue 40: a stream-copied container (LeRobot AV1 / H.264 mp4 bitstreams kept as they are) plays in
`robodata view` without re-encoding, and exports to LeRobot with every frame; values are checked
against PyAV's decode of the source file."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pytest

from robodata.catalog.table import Catalog
from robodata.container import EpisodeReader
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata.export.run import export
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.ingest.tables import IngestPaths


def _frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.fixture(scope="module", params=["av1", "h264"])
def ingested(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"copy-{request.param}")
    src = write_lerobot(
        d / "landing" / "ds", episodes=2, frames_per_episode=20, fps=10, height=64, width=64,
        codec=request.param, cameras=("top",), gop=2, bframes=0,
    )  # fmt: skip
    paths = IngestPaths(str(d / "state"))
    s = IngestSettings()
    write_manifest(paths, "b1", new_items(str(d / "landing"), LandingCursor()))
    out = run_batch(paths, "b1", s, derived=False)
    assert out["episodes"]["video_copied_streams"] == 2, out["episodes"]
    return request.param, d, src, s


def test_view_plays_copied_samples_without_reencoding(ingested, tmp_path):
    pytest.importorskip("rerun")
    from typer.testing import CliRunner

    from robodata.cli import app
    from tests.core.helpers_viz import decode, rrd_columns, sample_bytes

    codec, d, src, s = ingested
    ep = next((d / "state").rglob("*.rdep"))
    rrd = tmp_path / "ep.rrd"
    r = CliRunner().invoke(app, ["view", str(ep), "--save", str(rrd), "--quiet"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["reencoded_frames"] == 0
    cam = rrd_columns(rrd)["/cameras/top"]
    samples = sample_bytes([x for x in cam["VideoStream:sample"] if x is not None])
    reader = EpisodeReader.open(ep)
    source = _frames(next(src.rglob(f"episode_{int(reader.meta.episode_id[-6:]):06d}.mp4")))
    assert np.array_equal(decode(codec, samples), source)


def _manifest(d: Path, tmp_path: Path):
    """Every ingested episode in one manifest (no validation split, failed checks allowed)."""
    info, _ = curate(
        spec_from_dict({"version": 1, "name": "c", "split": {"val_fraction": 0.0}, "allow_failed_checks": ["*"]}),
        Catalog(IngestPaths(str(d / "state")).catalog),
        tmp_path / "m",
    )
    return info


def _packets(path: Path) -> list[bytes]:
    with av.open(str(path)) as c:
        return [bytes(p) for p in c.demux(video=0) if p.size]


def test_lerobot_export_of_copied_streams_holds_every_frame(ingested, tmp_path):
    codec, d, src, s = ingested
    info = _manifest(d, tmp_path)
    res = export(info.path, tmp_path / "lr", "lerobot")
    assert res["episodes"] == 2
    exported = next((tmp_path / "lr" / "videos").rglob("*.mp4"))
    got = _frames(exported)
    sources = sorted(src.rglob("*.mp4"))
    want = np.concatenate([_frames(p) for p in sources])
    assert got.shape == want.shape
    if codec == "av1":  # parameter sets in band: the source's packets remuxed, bit for bit
        assert res["video"] == {"top": "remux"}, res["video"]
        assert _packets(exported) == [p for f in sources for p in _packets(f)]
        assert np.array_equal(got, want)
    else:  # libx264's mp4 keeps SPS / PPS in its avcC record only: encoded, and why
        assert res["video"]["top"].startswith("encode: its parameter sets are only in the extradata"), res["video"]
        mse = np.mean((got.astype(np.float64) - want) ** 2)
        assert 10 * np.log10(255**2 / max(mse, 1e-9)) > 30  # re-encoded by the exporter, same frames


def test_loader_reads_copied_streams_frame_for_frame(ingested, tmp_path):
    from robodata.dataset import PatternDataset, ReadPattern, StreamWindow

    codec, d, src, s = ingested
    info = _manifest(d, tmp_path)
    pattern = ReadPattern("p", (StreamWindow("cam", ("top",), "video", length=3, offset=-1),), anchor_stride_s=0.3)
    ds = PatternDataset.from_manifest(info.path, pattern)
    keys = [ds.index.locate(i) for i in range(len(ds))]
    uris = ds.manifest.column("uri").to_pylist()
    for k, sample in zip(keys, ds.__getitems__(keys), strict=True):
        eid = EpisodeReader.open(uris[k.row]).meta.episode_id
        want = _frames(next(src.rglob(f"episode_{int(eid[-6:]):06d}.mp4")))
        got, pad = sample["top"].numpy(), sample["top_is_pad"].numpy()
        real = [j for j in range(len(got)) if not pad[j]]
        # consecutive source frames, bit for bit (a run of identical frames may match at several starts)
        assert any(
            all(np.array_equal(got[j], want[i0 + j]) for j in real) for i0 in range(-real[0], len(want) - real[-1])
        )
