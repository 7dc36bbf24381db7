import numpy as np

from robodata.container import EpisodeReader
from tests.core.helpers_container import write_small
from tests.core.s3_server import moto_s3


def test_read_window_over_s3_range_reads(tmp_path):
    p = tmp_path / "ep.rdep"
    write_small(p, duration_s=3.0)
    local = EpisodeReader.open(p).read_window(1.0, 2.0, ["cam_left", "joint_pos"])
    with moto_s3() as s3:
        client = s3["client"]
        client.create_bucket(Bucket="episodes")
        client.upload_file(str(p), "episodes", "site-a/ep.rdep")
        r = EpisodeReader.open("s3://episodes/site-a/ep.rdep", **s3["storage_options"])
        win = r.read_window(1.0, 2.0, ["cam_left", "joint_pos"])
        size = p.stat().st_size
        # range reads: the footer read plus one read per touched chunk, far less than the object
        assert r.source.stats.range_reads == 1 + r.stats.range_reads
        assert r.stats.bytes_read < size / 2
    np.testing.assert_array_equal(win["cam_left"].data, local["cam_left"].data)
    np.testing.assert_array_equal(win["joint_pos"].data, local["joint_pos"].data)
