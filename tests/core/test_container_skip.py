import numpy as np

from robodata.container import EpisodeReader
from robodata.container.meta import Layout, TopicGroup, VideoSettings
from tests.core.helpers_container import CAMS, write_small


def _layout(bframes: int) -> Layout:
    return Layout(
        groups=(
            TopicGroup("cameras", CAMS, 1.5, VideoSettings(gop=15, crf=20, bframes=bframes)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )


def test_subsampled_window_skips_non_reference_frames(tmp_path):
    p_b = tmp_path / "b.rdep"
    write_small(p_b, duration_s=3.0, fps=20.0, layout=_layout(bframes=2))
    p_p = tmp_path / "p.rdep"
    write_small(p_p, duration_s=3.0, fps=20.0, layout=_layout(bframes=0))

    rb = EpisodeReader.open(p_b)
    full = rb.read_window(0.2, 2.6, ["cam_left"])["cam_left"]
    rb.stats.frames_decoded = 0
    sub = rb.read_window(0.2, 2.6, ["cam_left"], every=3)["cam_left"]
    n = len(sub.t)
    assert n >= len(full.t) // 3
    # the subsampled frames are exactly the full decode's frames at those instants
    idx = np.searchsorted(full.t, sub.t)
    np.testing.assert_allclose(full.t[idx], sub.t)
    np.testing.assert_array_equal(full.data[idx], sub.data)
    assert np.all(np.diff(idx) == 3)
    decoded_b = rb.stats.frames_decoded

    rp = EpisodeReader.open(p_p)
    rp.read_window(0.2, 2.6, ["cam_left"], every=3)
    decoded_p = rp.stats.frames_decoded
    # with B-frames as non-reference frames, only about a third of the frames are decoded
    assert decoded_b < 0.6 * decoded_p, (decoded_b, decoded_p)
