"""bench.ingest's reads section counts every read of a landing item's files from an strace log:
whole calls, calls another thread interrupted (unfinished, then resumed), per stage, and nothing
of other files."""

from bench.ingest_reads import count

TRACE = """\
100   openat(AT_FDCWD, "/m/stage-sensor", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
100   read(3</land/ep1/cam/0.jpg>, ""..., 65536) = 1000
100   read(4</land/ep10/x.bin>, ""..., 65536) = 7
100   read(5</state/ingest/raw_episodes/part.parquet>, ""..., 65536) = 5000
100   openat(AT_FDCWD, "/m/stage-align", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
101   pread64(6</land/ep1/meta.json>, ""..., 4096, 0) = 40
100   openat(AT_FDCWD, "/m/stage-convert", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
102   read(7</land/ep1/cam/1.jpg>, <unfinished ...>
103   read(8</land/ep1/cam/2.jpg>, ""..., 65536) = 300
102   <... read resumed>""..., 65536) = 900
103   read(9</containers/b/ep1.rdep>, ""..., 65536) = 65536
100   openat(AT_FDCWD, "/m/stage-end", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
100   read(3</land/ep1/cam/0.jpg>, ""..., 65536) = 1000
"""


def test_reads_are_counted_per_item_and_stage():
    got = count(TRACE, {"/land/ep1": 2240, "/land/ep10": 7})
    assert got["/land/ep1"] == {"sensor": 1000, "align": 40, "convert": 1200}
    assert got["/land/ep10"] == {"sensor": 7, "align": 0, "convert": 0}  # ep10 is not under ep1
