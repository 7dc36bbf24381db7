"""Checkpoint discovery and integrity checks on S3 (moto on loopback), as on a local disk."""

import json
import uuid
import zlib

import pytest

from robodata.storage import objects
from robodata.train.checkpoint import checkpoint_problem, complete_checkpoints, partial_checkpoints


@pytest.fixture(scope="module")
def s3():
    from robodata_testing.services import LoopbackS3

    with LoopbackS3.start(f"ckpt-{uuid.uuid4().hex[:12]}") as srv:
        yield srv


def _fake(root, step, opts, complete=True):
    d = f"{root}/step-{step:08d}"
    files = {}
    for name, data in ((".metadata", b"m" * 10), ("__0_0.distcp", b"x" * 100), ("meta.json", b"{}")):
        objects.write_durable(f"{d}/{name}", data, opts)
        files[name] = [len(data), zlib.crc32(data)]
    if complete:
        objects.write_durable(f"{d}/COMPLETE", json.dumps({"step": step, "files": files}).encode(), opts)
    return d


def test_checkpoints_on_s3_complete_partial_and_corrupted(s3):
    opts, root = s3.location().fsspec_options(), f"s3://{s3.bucket}/run/checkpoints"
    assert complete_checkpoints(root, opts) == [] and partial_checkpoints(root, opts) == []
    good, newer = _fake(root, 4, opts), _fake(root, 8, opts)
    partial = _fake(root, 12, opts, complete=False)  # shards written, never published
    assert complete_checkpoints(root, opts) == [newer, good]
    assert partial_checkpoints(root, opts) == [partial]
    assert checkpoint_problem(good, options=opts) is None
    objects.write_durable(f"{newer}/__0_0.distcp", b"x" * 50 + b"y" + b"x" * 49, opts)
    assert "CRC32 mismatch" in checkpoint_problem(newer, options=opts)
    objects.filesystem(root, opts).rm_file(f"{good}/.metadata")
    assert "missing file .metadata" in checkpoint_problem(good, options=opts)
