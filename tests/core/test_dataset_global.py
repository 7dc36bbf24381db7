"""Global shuffle, as users train: samples scattered over an episode fetch only their own chunks
(the frames are those of one sample at a time), frames go to float on the consumer's device, and
the bench's order statistics tell a shuffle from blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robodata.dataset import Anchor, PatternDataset, PatternSampler, ReadPattern, StreamWindow
from robodata.dataset.device import frames_to_float
from robodata.dataset.frames import spans
from robodata.errors import ConfigError
from tests.core.helpers_container import CAMS, write_small
from tests.core.helpers_dataset import manifest

PATTERN = ReadPattern(
    "vla",
    (
        StreamWindow("cameras", CAMS, "video", length=2, offset=-1),
        StreamWindow("state", ("joint_pos",), "array", length=1),
    ),
    anchor_stride_s=0.05,
)


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    p = tmp_path_factory.mktemp("global") / "ep.rdep"
    write_small(p, duration_s=6.0)  # 1 s camera chunks
    return PatternDataset(manifest([str(p)], [6.0]), PATTERN)


def test_scattered_samples_fetch_their_own_chunks_and_get_the_same_frames(ds):
    far = [Anchor(0, 0.5), Anchor(0, 5.5)]  # one batch, two samples 5 s apart
    ds.close()
    got = ds.batch(far, shared=False)
    reader = ds.reader(0)
    read = reader.stats.chunks_read
    # the camera chunks of the two samples only (2 of 6; the state's window read spans both, 3 chunks
    # of 2 s): reading everything between them was 9
    assert read <= 5, read
    for i, a in enumerate(far):  # each sample as it comes alone
        alone = ds.batch([a], shared=False)
        for k in (*CAMS, "joint_pos", "t"):
            np.testing.assert_array_equal(got[k][i].numpy(), alone[k][0].numpy(), err_msg=k)


def test_spans_merge_overlapping_windows():
    assert spans(np.array([3.0, 0.0, 1.0]), np.array([4.0, 1.5, 2.0])) == [(0.0, 2.0), (3.0, 4.0)]


def test_frames_to_float_converts_on_the_device_and_normalises():
    hwc = torch.randint(0, 256, (2, 3, 4, 5, 3), dtype=torch.uint8)
    out = frames_to_float(hwc, "cpu")
    assert out.dtype == torch.float32 and out.shape == (2, 3, 3, 4, 5)
    torch.testing.assert_close(out, hwc.permute(0, 1, 4, 2, 3).float() / 255)
    chw = hwc.permute(0, 1, 4, 2, 3).contiguous()
    torch.testing.assert_close(frames_to_float(chw, layout="chw"), out)
    norm = frames_to_float(hwc, "cpu", mean=(0.5, 0.5, 0.5), std=(0.25, 0.5, 1.0))
    torch.testing.assert_close(norm[:, :, 0], (out[:, :, 0] - 0.5) / 0.25)
    torch.testing.assert_close(norm[:, :, 2], out[:, :, 2] - 0.5)
    with pytest.raises(ConfigError, match="uint8"):
        frames_to_float(out)
    with pytest.raises(ConfigError, match="3 channels"):
        frames_to_float(chw)  # CHW passed as HWC
    with pytest.raises(ConfigError, match="std"):
        frames_to_float(hwc, std=(1.0, 0.0, 1.0))


def test_order_statistics_tell_a_shuffle_from_blocks(ds):
    from bench.lerobot_peer_order import order_statistics

    st = order_statistics(ds.index, batch=8, block=8)
    assert set(st) == {"global", "block", "uniform"}
    # global: samples of one batch as far apart as in a uniform permutation; block: 8 neighbours
    gap = {k: v["same_episode_gap_s"] for k, v in st.items()}
    assert 0.7 < gap["global"] / gap["uniform"] < 1.3 and gap["block"] < gap["uniform"] / 4, gap
    assert all(abs(v["position_rank_corr"]) < 0.4 for v in st.values())  # ~120 samples: sd ~0.09
    keys = list(PatternSampler(ds.index, seed=0))  # the sampler's default order is the global shuffle
    assert sorted((k.row, k.t) for k in keys) == sorted((a.row, a.t) for a in map(ds.index.locate, range(len(keys))))
