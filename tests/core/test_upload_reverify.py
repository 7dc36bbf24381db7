"""A delete always follows a fresh check. The uploader is SIGKILLed right after its journal says
"verified" (a real kill, before the local delete); then the upstream object is deleted, overwritten
or truncated and/or the local file appended to; `robodata upload once` must hash the local file
again, re-read upstream and upload again before it deletes anything."""

from __future__ import annotations

import random
import signal
import sqlite3

import pytest

from tests.core.helpers_upload import (
    BUCKET,
    PREFIX,
    episodes_in,
    in_process_uploader,
    moto_server,
    s3,
    upload_once,
    upstream_identical,
    write_config,
    write_episode,
)

APPENDED = b"appended after the crash"
# (episode kind, what happens upstream, local append) per episode, in upload order
CASES = [
    ("file", "deleted", False),
    ("dir", "deleted", False),
    ("file", "overwritten", False),
    ("dir", "overwritten", False),
    ("file", "truncated", False),
    ("dir", "truncated", True),
    ("file", "kept", True),
    ("dir", "kept", True),
    ("file", "deleted", True),
    ("file", "kept", False),  # nothing changed: re-verified, not sent again
]


def _verified(spool) -> set[str]:
    db = sqlite3.connect(spool / ".robodata-upload" / "journal.sqlite")
    try:
        return {n for (n,) in db.execute("SELECT name FROM episodes WHERE state = 'verified'")}
    finally:
        db.close()


def test_killed_after_verified_then_tampered_is_uploaded_again_before_delete(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    rng = random.Random(16)
    expected, case_of = {}, {}
    for i, case in enumerate(CASES):
        name = f"ep{i:02d}" + (".mcap" if case[0] == "file" else "")
        expected[name] = write_episode(spool, name, rng, kind=case[0], max_bytes=200_000)
        case_of[name] = case
    with moto_server() as url:
        client = s3(url)
        # Versioning: a re-upload makes a new version, so "not sent again" is observable.
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        cfg = write_config(tmp_path / "u.yaml", spool, url)
        tampered: set[str] = set()
        stamps = {}
        for _ in CASES:  # each run: earlier episodes re-verified and deleted, the next one killed
            proc = upload_once(cfg, kill_after_verified=1)
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
            (name,) = _verified(spool) - tampered
            assert name in episodes_in(spool), "killed before the delete"
            assert upstream_identical(client, expected[name]) == []
            kind, upstream, append = case_of[name]
            key = sorted(expected[name])[-1]
            if upstream == "deleted":
                client.delete_object(Bucket=BUCKET, Key=key)
            elif upstream == "overwritten":
                client.put_object(Bucket=BUCKET, Key=key, Body=b"other bytes", Metadata={"sha256": "0" * 64})
            elif upstream == "truncated":
                client.put_object(Bucket=BUCKET, Key=key, Body=expected[name][key][:-1])
            if append:
                local = spool / name / key.removeprefix(f"{PREFIX}/{name}/") if kind == "dir" else spool / name
                with open(local, "ab") as f:
                    f.write(APPENDED)
                expected[name][key] += APPENDED
            if (upstream, append) == ("kept", False):
                stamps[key] = client.head_object(Bucket=BUCKET, Key=key)["VersionId"]
            tampered.add(name)
        assert tampered == set(expected)
        proc = upload_once(cfg)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out + err).decode()[-2000:]
        assert not episodes_in(spool)
        flat = {k: v for files in expected.values() for k, v in files.items()}
        assert upstream_identical(client, flat) == [], "deleted locally while upstream differs"
        for key, stamp in stamps.items():  # an intact copy is re-read, not sent again
            assert client.head_object(Bucket=BUCKET, Key=key)["VersionId"] == stamp


def test_a_write_between_the_last_check_and_the_rename_puts_the_episode_back(tmp_path, monkeypatch):
    from tests.core.helpers_upload import CREDS

    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "ep.mcap").write_bytes(b"x" * 1000)
    with moto_server() as url:
        up = in_process_uploader(spool, url)
        original = up.journal.set_episode

        def late_writer(name, state, *args, **kwargs):
            original(name, state, *args, **kwargs)
            if state == "verified":  # after the last check, just before the rename
                with open(spool / "ep.mcap", "ab") as f:
                    f.write(APPENDED)

        up.journal.set_episode = late_writer
        assert up.run_pass() == {"failed": 1}
        assert (spool / "ep.mcap").read_bytes() == b"x" * 1000 + APPENDED, "back in the spool, whole"
        up.journal.set_episode = original
        assert up.run_pass() == {"uploaded": 1}
        assert upstream_identical(s3(url), {f"{PREFIX}/ep.mcap": b"x" * 1000 + APPENDED}) == []


def test_one_process_hashes_an_unchanged_file_once_and_any_change_again(tmp_path, monkeypatch):
    import os
    import time

    import robodata.upload.uploader as uploader_mod
    from tests.core.helpers_upload import CREDS
    from tests.core.s3_server import free_port

    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    calls = []
    real = uploader_mod.digest_file

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(uploader_mod, "digest_file", counted)
    spool = tmp_path / "spool"
    spool.mkdir()
    f = spool / "ep.mcap"
    f.write_bytes(b"y" * 5000)
    up = in_process_uploader(spool, f"http://127.0.0.1:{free_port()}", connect_timeout_s=0.2)  # offline
    assert up.run_pass() == {"offline": 1}
    assert up.run_pass() == {"offline": 1}
    assert len(calls) == 1, "an offline daemon does not re-read its spool every pass"
    st = f.stat()
    time.sleep(0.05)  # past the file system's timestamp tick
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime; ctime moves
    assert up.run_pass() == {"offline": 1}
    assert len(calls) == 2


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_killed_between_the_rename_into_the_trash_and_the_purge_is_checked_again(tmp_path, kind):
    """The kill leaves a verified episode in the trash; upstream then loses an object. The next
    start must put the episode back and upload it again, never purge the trash unchecked."""
    spool = tmp_path / "spool"
    spool.mkdir()
    name = "a.mcap" if kind == "file" else "b"
    expected = write_episode(spool, name, random.Random(7), kind=kind, max_bytes=100_000)
    with moto_server() as url:
        client = s3(url)
        cfg = write_config(tmp_path / "u.yaml", spool, url)
        proc = upload_once(cfg, kill_after_verified=1)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
        assert _verified(spool) == {name}
        trash = spool / ".robodata-upload" / "trash"
        trash.mkdir(parents=True, exist_ok=True)
        (spool / name).rename(trash / name)  # the state a kill right after _delete's rename leaves
        client.delete_object(Bucket=BUCKET, Key=sorted(expected)[-1])
        proc = upload_once(cfg)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out + err).decode()[-2000:]
        assert upstream_identical(client, expected) == [], "the trash was purged while upstream had lost a copy"
        assert not episodes_in(spool) and not any(trash.iterdir())
