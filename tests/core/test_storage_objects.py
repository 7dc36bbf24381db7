"""storage.objects helpers for immutable objects and published folders, on a local disk and on S3."""

import os
import uuid

import pytest

from robodata.storage import objects


@pytest.fixture(scope="module")
def s3():
    from robodata_testing.services import LoopbackS3

    with LoopbackS3.start(f"objects-{uuid.uuid4().hex[:12]}") as srv:
        yield srv


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path, s3):
    if request.param == "local":
        return str(tmp_path / "root"), {}
    return f"s3://{s3.bucket}/{uuid.uuid4().hex[:8]}", s3.location().fsspec_options()


def test_create_never_overwrites(where):
    root, opts = where
    uri = f"{root}/manifests/m-1.parquet"
    assert objects.create(uri, b"first", opts) is True
    assert objects.create(uri, b"second", opts) is False  # already there: nothing written
    assert objects.read_bytes(uri, opts) == b"first"
    if not objects.is_remote(uri):
        assert os.listdir(os.path.dirname(uri)) == ["m-1.parquet"]  # no temporary file left


def test_staged_folder_is_published_and_removed_marker_first(where):
    root, opts = where
    final = f"{root}/ckpt/step-00000001"
    staging = objects.staging_folder(final)
    assert (staging == final) == objects.is_remote(root)  # S3 cannot rename a folder
    objects.write_durable(f"{staging}/shard", b"x" * 10, opts)
    objects.write_durable(f"{staging}/COMPLETE", b"{}", opts)
    objects.publish_folder(staging, final, opts)
    assert objects.read_bytes(f"{final}/shard", opts) == b"x" * 10
    assert staging == final or not objects.exists(staging, opts)
    objects.remove_folder(final, opts, first=["COMPLETE"])
    assert not objects.exists(f"{final}/COMPLETE", opts) and not objects.exists(f"{final}/shard", opts)
    objects.remove_folder(f"{root}/ckpt/never-written", opts, first=["COMPLETE"])  # missing is fine


def test_republishing_replaces_an_older_folder(tmp_path):
    final = str(tmp_path / "step-00000002")
    for payload in (b"old", b"new"):
        staging = objects.staging_folder(final)
        objects.write_durable(f"{staging}/f", payload)
        objects.publish_folder(staging, final)
    assert objects.read_bytes(f"{final}/f") == b"new" and os.listdir(tmp_path) == ["step-00000002"]
