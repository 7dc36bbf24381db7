"""Spool protocol, refusals, conflicts, resume, verification modes, bandwidth cap (real moto server)."""

from __future__ import annotations

import json
import os
import random
import time

import pytest

from robodata.stateful import Stateful
from robodata.upload.config import RetryConfig
from tests.core.helpers_upload import (
    BUCKET,
    PART,
    PREFIX,
    episodes_in,
    in_process_uploader,
    upload_world,
    upstream_identical,
)

RNG = random.Random(0)


env = pytest.fixture(upload_world)


def uploader(spool, url, **kw):
    kw.setdefault("retry", RetryConfig(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01))
    return in_process_uploader(spool, url, part_size=PART, min_part_size=PART, **kw)


def keys(client):
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def test_rename_protocol_ignores_partial_and_hidden(env):
    spool, url, client = env
    (spool / "ep1.mcap.partial").write_bytes(b"half")
    (spool / "ep2.partial").mkdir()
    (spool / "ep2.partial" / "a.bin").write_bytes(b"x")
    (spool / ".hidden").write_bytes(b"x")
    (spool / "ep3.mcap").write_bytes(b"done")
    up = uploader(spool, url)
    assert up.run_pass() == {"uploaded": 1}
    assert keys(client) == [f"{PREFIX}/ep3.mcap"]
    assert episodes_in(spool) == {"ep1.mcap.partial", "ep2.partial"}
    os.rename(spool / "ep1.mcap.partial", spool / "ep1.mcap")
    assert up.run_pass() == {"uploaded": 1}
    assert client.get_object(Bucket=BUCKET, Key=f"{PREFIX}/ep1.mcap")["Body"].read() == b"half"


def test_marker_protocol_waits_for_done(env):
    spool, url, client = env
    up = uploader(spool, url, completion="marker")
    f = spool / "ep1.mcap"
    with open(f, "wb") as w:
        w.write(b"a" * 100_000)  # still being written: no marker yet
        w.flush()
        assert up.run_pass() == {}
        w.write(b"b" * 100_000)
    assert keys(client) == []
    (spool / "ep1.mcap.done").write_bytes(b"")
    assert up.run_pass() == {"uploaded": 1}
    assert not f.exists() and not (spool / "ep1.mcap.done").exists()
    assert client.get_object(Bucket=BUCKET, Key=f"{PREFIX}/ep1.mcap")["Body"].read() == b"a" * 100_000 + b"b" * 100_000


def test_directory_episode_gets_a_manifest_last(env):
    spool, url, client = env
    d = spool / "ep7"
    (d / "cam").mkdir(parents=True)
    (d / "cam" / "000001.jpg").write_bytes(RNG.randbytes(200_000))
    (d / "meta.json").write_text("{}")
    up = uploader(spool, url)
    assert up.run_pass() == {"uploaded": 1}
    man = json.loads(client.get_object(Bucket=BUCKET, Key=f"{PREFIX}/ep7/_UPLOADED.json")["Body"].read())
    assert sorted(f["path"] for f in man["files"]) == ["cam/000001.jpg", "meta.json"]
    assert all(len(f["sha256"]) == 64 for f in man["files"])
    assert keys(client) == sorted(
        [f"{PREFIX}/ep7/_UPLOADED.json", f"{PREFIX}/ep7/cam/000001.jpg", f"{PREFIX}/ep7/meta.json"]
    )


def test_complete_marker_goes_up_last_and_min_age_waits(env):
    from robodata.upload.spool import describe

    spool, url, client = env
    d = spool / "ep9"
    d.mkdir()
    for name in ("_COMPLETE", "a.bin", "state.parquet", "Z.bin"):
        (d / name).write_bytes(b"x")
    assert [f.relpath for f in describe(spool, "ep9").files][-1] == "_COMPLETE"
    up = uploader(spool, url, min_age_s=3600)
    assert up.run_pass() == {}  # too fresh
    up = uploader(spool, url)
    assert up.run_pass() == {"uploaded": 1}


def test_refused_episodes_stay_local_and_are_counted_once(env, tmp_path):
    spool, url, client = env
    outside = tmp_path / "secret"
    outside.write_bytes(b"do not upload")
    os.symlink(outside, spool / "link.mcap")
    (spool / "ep_bad\\..\\x").write_bytes(b"x")
    (spool / "ep_links").mkdir()
    os.symlink(outside, spool / "ep_links" / "a.bin")
    (spool / "ep_reserved").mkdir()
    (spool / "ep_reserved" / "_UPLOADED.json").write_text("{}")
    up = uploader(spool, url)
    assert up.run_pass() == {"rejected": 4}
    assert up.run_pass() == {"rejected": 4}
    assert up.journal.counters()["episodes_rejected"] == 4
    assert keys(client) == [] and outside.read_bytes() == b"do not upload"
    assert episodes_in(spool) == {"link.mcap", "ep_bad\\..\\x", "ep_links", "ep_reserved"}
    os.unlink(spool / "link.mcap")
    up.run_pass()
    assert len(up.journal.episodes("rejected")) == 3  # the journal forgets what the operator removed


def test_conflicting_upstream_object_is_not_overwritten(env):
    spool, url, client = env
    client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/ep1.mcap", Body=b"someone else's episode")
    (spool / "ep1.mcap").write_bytes(b"mine")
    (spool / "ep2.mcap").write_bytes(b"fine")
    up = uploader(spool, url)
    assert up.run_pass() == {"conflict": 1, "uploaded": 1}
    assert client.get_object(Bucket=BUCKET, Key=f"{PREFIX}/ep1.mcap")["Body"].read() == b"someone else's episode"
    assert (spool / "ep1.mcap").read_bytes() == b"mine"
    assert [n for n, _ in up.journal.episodes("conflict")] == ["ep1.mcap"]
    assert up.run_pass() == {"conflict": 1}  # re-checked every pass, counted once
    assert up.journal.counters()["episodes_conflict"] == 1


def test_already_uploaded_identical_object_is_verified_not_resent(env):
    spool, url, client = env
    data = RNG.randbytes(3 * PART + 5)
    (spool / "ep1.mcap").write_bytes(data)
    up = uploader(spool, url)
    up.run_pass()
    (spool / "ep1.mcap").write_bytes(data)  # same episode again (e.g. the journal was wiped)
    up2 = uploader(spool, url, state_dir=str(spool.parent / "fresh-state"))
    assert up2.run_pass() == {"uploaded": 1}
    assert "bytes_uploaded" not in up2.journal.counters()


class Crash(BaseException):
    pass


def crash_after(parts: int):
    seen = [0]

    def on_bytes(n):
        seen[0] += 1
        if seen[0] >= parts:
            raise Crash()

    return on_bytes


def test_restart_resumes_multipart_without_resending_parts(env):
    spool, url, client = env
    data = RNG.randbytes(8 * PART + 999)  # 9 parts
    (spool / "big.mcap").write_bytes(data)
    up = uploader(spool, url)
    up.on_bytes = crash_after(3)
    with pytest.raises(Crash):
        up.run_pass()
    assert up.journal.counters()["bytes_uploaded"] == 3 * PART
    assert up.journal.open_uploads(), "the open upload id is journaled"
    up.close()
    up2 = uploader(spool, url)
    assert up2.run_pass() == {"uploaded": 1}
    c = up2.journal.counters()
    assert c["parts_resumed"] == 3
    assert c["bytes_uploaded"] == len(data)  # 3 parts before the crash + 6 after: nothing sent twice
    assert upstream_identical(client, {f"{PREFIX}/big.mcap": data}) == []


def test_state_dict_moves_an_upload_between_journals(env):
    spool, url, client = env
    data = RNG.randbytes(4 * PART + 1)
    (spool / "big.mcap").write_bytes(data)
    up = uploader(spool, url)
    as_stateful: object = up  # (narrowing this name keeps `up` typed as an Uploader)
    assert isinstance(as_stateful, Stateful)
    up.on_bytes = crash_after(2)
    with pytest.raises(Crash):
        up.run_pass()
    state = up.state_dict()
    assert [r[0] for r in state["journal"]["files"]] == [f"{PREFIX}/big.mcap"]
    up2 = uploader(spool, url, state_dir=str(spool.parent / "other-state"))
    up2.load_state_dict(state)
    assert up2.run_pass() == {"uploaded": 1}
    assert up2.journal.counters()["parts_resumed"] == 2


def test_file_changed_after_crash_is_rehashed(env):
    spool, url, client = env
    f = spool / "big.mcap"
    f.write_bytes(RNG.randbytes(4 * PART))
    up = uploader(spool, url)
    up.on_bytes = crash_after(1)
    with pytest.raises(Crash):
        up.run_pass()
    new = RNG.randbytes(5 * PART + 3)
    f.write_bytes(new)  # a writer that broke the protocol
    up.on_bytes = None
    assert up.run_pass() == {"uploaded": 1}
    assert upstream_identical(client, {f"{PREFIX}/big.mcap": new}) == []


def test_download_verification(env):
    spool, url, client = env
    data = RNG.randbytes(2 * PART + 7)
    (spool / "ep.mcap").write_bytes(data)
    up = uploader(spool, url, verify="download")
    assert up.run_pass() == {"uploaded": 1}
    assert upstream_identical(client, {f"{PREFIX}/ep.mcap": data}) == []


def test_bandwidth_cap_slows_the_upload(env):
    spool, url, client = env
    (spool / "ep.mcap").write_bytes(RNG.randbytes(5 * PART))  # 320 KiB
    up = uploader(spool, url, bandwidth_bytes_per_s=200_000)
    t = time.monotonic()
    assert up.run_pass() == {"uploaded": 1}
    # Lower bound only (a loaded machine is slower, never faster): (bytes - burst) / rate.
    assert time.monotonic() - t >= (5 * PART - 64 * 1024) / 200_000 * 0.95


def test_unreachable_endpoint_ends_the_pass_early(env):
    from tests.core.s3_server import free_port

    spool, url, client = env
    for i in range(3):
        (spool / f"ep{i}.mcap").write_bytes(b"x")
    up = uploader(spool, f"http://127.0.0.1:{free_port()}", connect_timeout_s=0.5)
    assert up.run_pass() == {"offline": 1}  # one episode finds the network down; the others wait
    assert episodes_in(spool) == {"ep0.mcap", "ep1.mcap", "ep2.mcap"}
    assert up.journal.counters()["retries"] == 2
