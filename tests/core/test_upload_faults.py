"""A fault-injecting HTTP proxy in front of moto: 500s and corrupted ETags cause retries, never deletion."""

from __future__ import annotations

import random

import pytest

from robodata.upload.config import RetryConfig, UploadConfig
from robodata.upload.uploader import Uploader
from tests.core.helpers_upload import (
    BUCKET,
    CREDS,
    PART,
    PREFIX,
    Faults,
    episodes_in,
    fault_proxy,
    moto_server,
    s3,
    upstream_identical,
    write_episode,
)


@pytest.fixture()
def world(tmp_path, monkeypatch):
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    with moto_server() as url:
        faults = Faults(seed=3)
        with fault_proxy(url, faults) as proxy:
            yield tmp_path, url, proxy, faults


def make_uploader(spool, endpoint, attempts=6):
    retry = RetryConfig(max_attempts=attempts, base_delay_s=0.001, max_delay_s=0.01)
    cfg = UploadConfig(
        spool=str(spool),
        bucket=BUCKET,
        site_prefix=PREFIX,
        endpoint_url=endpoint,
        part_size=PART,
        min_part_size=PART,
        retry=retry,
    )
    return Uploader(cfg)


def guard_deletes(up: Uploader, direct, expected):
    """Spy: at the moment of every local delete, the upstream copy must already be identical."""
    deleted, original = [], up._delete

    def checked(ep):
        name = ep.name
        assert upstream_identical(direct, expected[name]) == [], f"{name} deleted before it was upstream intact"
        deleted.append(name)
        original(ep)

    setattr(up, "_delete", checked)  # noqa: B010 - a spy on the instance
    return deleted


def spool_with(tmp_path, n, seed=1):
    spool = tmp_path / "spool"
    spool.mkdir()
    rng = random.Random(seed)
    expected = {
        f"ep{i:02d}": write_episode(spool, f"ep{i:02d}", rng, kind="dir" if i % 2 else "file", max_bytes=250_000)
        for i in range(n)
    }
    return spool, expected


def test_random_500s_and_bad_etags_are_retried(world):
    tmp_path, url, proxy, faults = world
    spool, expected = spool_with(tmp_path, 12)
    faults.p_500_before = faults.p_500_after = faults.p_bad_etag = 0.12
    up = make_uploader(spool, proxy, attempts=12)
    deleted = guard_deletes(up, s3(url), expected)
    for _ in range(10):
        up.run_pass()
        if not episodes_in(spool):
            break
    assert not episodes_in(spool)
    assert sorted(deleted) == sorted(expected)
    assert all(v > 0 for v in faults.injected.values()), faults.injected
    c = up.journal.counters()
    assert c["retries"] >= sum(faults.injected.values()) * 0.5
    assert c["episodes_deleted"] == 12
    flat = {k: v for files in expected.values() for k, v in files.items()}
    assert upstream_identical(s3(url), flat) == []


def test_always_corrupt_etag_on_head_never_deletes(world):
    tmp_path, url, proxy, faults = world
    spool, expected = spool_with(tmp_path, 4)
    faults.methods = {"HEAD"}
    faults.p_bad_etag = 1.0
    up = make_uploader(spool, proxy, attempts=3)
    deleted = guard_deletes(up, s3(url), expected)
    for _ in range(2):
        out = up.run_pass()
        assert out == {"failed": 4}
    assert episodes_in(spool) == set(expected), "nothing may be deleted while verification fails"
    assert deleted == []
    c = up.journal.counters()
    assert c["verify_failures"] >= 4 and c["retries"] > 0 and "episodes_deleted" not in c
    # The server recovers: the next pass uploads, verifies and only then deletes.
    faults.p_bad_etag = 0.0
    assert up.run_pass() == {"uploaded": 4}
    assert sorted(deleted) == sorted(expected) and not episodes_in(spool)


def test_always_500_keeps_everything_local(world):
    tmp_path, url, proxy, faults = world
    spool, expected = spool_with(tmp_path, 3)
    faults.methods = {"PUT", "POST", "HEAD", "GET"}
    faults.p_500_before = 1.0
    up = make_uploader(spool, proxy, attempts=3)
    assert up.run_pass() == {"failed": 3}
    assert episodes_in(spool) == set(expected)
    assert up.journal.counters()["retries"] >= 3 * 2
    faults.p_500_before = 0.0
    assert up.run_pass() == {"uploaded": 3}
    assert not episodes_in(spool)


def test_500_after_complete_is_resolved_by_head(world):
    """The server completes the multipart upload but the answer is lost: a retry must not lose it."""
    tmp_path, url, proxy, faults = world
    spool = tmp_path / "spool"
    spool.mkdir()
    data = random.Random(5).randbytes(5 * PART + 17)
    (spool / "big.bin").write_bytes(data)
    faults.methods = {"POST"}
    faults.match = lambda method, path: "uploadId=" in path  # CompleteMultipartUpload only
    faults.p_500_after, faults.budget = 1.0, 1
    up = make_uploader(spool, proxy, attempts=3)
    deleted = guard_deletes(up, s3(url), {"big.bin": {f"{PREFIX}/big.bin": data}})
    assert up.run_pass() == {"uploaded": 1}  # retry -> NoSuchUpload -> HEAD proves it completed
    assert faults.injected["500_after"] == 1 and deleted == ["big.bin"]
    assert s3(url).get_object(Bucket=BUCKET, Key=f"{PREFIX}/big.bin")["Body"].read() == data
