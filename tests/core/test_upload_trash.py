"""A kill inside a delete (after the rename into the trash, before the journal row's drop) is
settled by the next start: the purge is finished once the upstream copy is re-verified as it is
now, a whole entry that cannot be re-verified goes back into the spool, and a partly purged
directory that cannot be re-verified is held in the trash, untouched, and never re-uploaded with
a manifest that lacks the purged files."""

from __future__ import annotations

import random
import shutil

import pytest

from robodata.upload.status import collect, prometheus
from tests.core.helpers_upload import (
    BUCKET,
    PREFIX,
    episodes_in,
    in_process_uploader,
    upload_world,
    upstream_identical,
    write_episode,
)


class Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs in the dying process."""


world = pytest.fixture(upload_world)


def _killed_inside_the_delete(spool, url, name: str, kind: str, purged: int) -> dict[str, bytes]:
    """Upload `name`, then die right after its rename into the trash with `purged` files removed."""
    expected = write_episode(spool, name, random.Random(3), kind=kind, max_bytes=200_000)
    if kind == "dir":
        expected[f"{PREFIX}/{name}/extra/z.bin"] = b"z" * 5000
        (spool / name / "extra").mkdir()
        (spool / name / "extra" / "z.bin").write_bytes(b"z" * 5000)
    up = in_process_uploader(spool, url)
    done = [0]

    def rmtree(path, *a, **k):
        files = sorted(p for p in path.rglob("*") if p.is_file())
        for p in files[:purged]:
            p.unlink()
        raise Killed

    def take(n, _take=up.trash.take):
        _take(n)
        done[0] += 1
        if kind == "file" or not purged:
            raise Killed

    up.trash.take = take
    real = shutil.rmtree
    shutil.rmtree = rmtree
    try:
        with pytest.raises(Killed):
            up.run_pass()
    finally:
        shutil.rmtree = real
    up.journal.db.close()  # the dead process's connection; committed rows stay
    assert done[0] == 1 and not episodes_in(spool)
    return expected


def _manifest(client, name: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=f"{PREFIX}/{name}/_UPLOADED.json")["Body"].read()


def _trash(spool):
    return spool / ".robodata-upload" / "trash"


@pytest.mark.parametrize(("kind", "purged"), [("file", 0), ("dir", 0), ("dir", 1), ("dir", 99)])
def test_the_next_start_finishes_the_delete_without_the_episode_re_entering_the_spool(world, kind, purged):
    spool, url, client = world
    name = "a.mcap" if kind == "file" else "b"
    expected = _killed_inside_the_delete(spool, url, name, kind, purged)
    manifest = _manifest(client, name) if kind == "dir" else None
    up = in_process_uploader(spool, url)  # the next start settles the trash
    assert not episodes_in(spool), "the episode came back into the spool"
    assert not any(_trash(spool).iterdir())
    assert up.journal.episode_state(name) is None and up.journal.files_of(name) == []
    assert up.journal.counters().get("episodes_deleted") == 1
    assert up.run_pass() == {}
    if manifest is not None:
        assert _manifest(client, name) == manifest, "the manifest was rewritten"
    assert upstream_identical(client, expected) == []
    up.close()


def test_a_partly_purged_directory_whose_upstream_copy_lost_an_object_is_held_until_it_verifies(world):
    spool, url, client = world
    expected = _killed_inside_the_delete(spool, url, "b", "dir", 1)
    lost = sorted(expected)[-1]
    client.delete_object(Bucket=BUCKET, Key=lost)
    manifest = _manifest(client, "b")
    before = sorted(p.relative_to(_trash(spool)) for p in _trash(spool).rglob("*"))
    up = in_process_uploader(spool, url)
    assert sorted(p.relative_to(_trash(spool)) for p in _trash(spool).rglob("*")) == before, "held untouched"
    assert not episodes_in(spool), "a partly purged directory must not be uploaded again"
    failures = up.journal.counters().get("verify_failures", 0)
    assert up.run_pass() == {"held": 1}
    assert up.run_pass() == {"held": 1}
    assert up.journal.counters().get("verify_failures", 0) == failures, "a held entry is not counted every pass"
    status = collect(up.journal, up.ready(), up.trash.entries())
    assert status["held"] == ["b"] and "robodata_upload_episodes_held_in_trash 1" in prometheus(status)
    assert up.journal.episode_state("b") == ("verified", "")
    assert _manifest(client, "b") == manifest
    client.put_object(Bucket=BUCKET, Key=lost, Body=expected[lost], Metadata=_meta(up, lost))
    assert up.run_pass() == {}, "re-verified on a later pass: the purge is finished"
    assert not any(_trash(spool).iterdir()) and up.journal.episode_state("b") is None
    assert upstream_identical(client, expected) == []
    up.close()


def _meta(up, key: str) -> dict[str, str]:
    return {"sha256": next(r.sha256 for r in up.journal.files_of("b") if r.key == key)}


def test_a_partly_purged_directory_is_held_while_upstream_is_unreachable(world, tmp_path):
    spool, url, client = world
    _killed_inside_the_delete(spool, url, "b", "dir", 2)
    up = in_process_uploader(spool, "http://127.0.0.1:9")  # nothing listens there
    assert up.trash.entries() == ["b"] and not episodes_in(spool)
    up.close()
    up = in_process_uploader(spool, url)
    assert up.trash.entries() == [] and up.journal.episode_state("b") is None
    up.close()


def test_a_whole_entry_changed_in_the_trash_goes_back_and_is_uploaded_again(world):
    spool, url, client = world
    expected = _killed_inside_the_delete(spool, url, "a.mcap", "file", 0)
    with open(_trash(spool) / "a.mcap", "ab") as f:  # a writer that still held the file open
        f.write(b"late bytes")
    expected[f"{PREFIX}/a.mcap"] += b"late bytes"
    up = in_process_uploader(spool, url)
    assert episodes_in(spool) == {"a.mcap"} and up.trash.entries() == []
    assert up.run_pass() == {"uploaded": 1}
    assert upstream_identical(client, expected) == []
    up.close()


def test_a_whole_entry_whose_upstream_manifest_is_gone_goes_back_and_is_uploaded_again(world):
    spool, url, client = world
    expected = _killed_inside_the_delete(spool, url, "b", "dir", 0)
    client.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/b/_UPLOADED.json")
    up = in_process_uploader(spool, url)
    assert episodes_in(spool) == {"b"}
    assert up.run_pass() == {"uploaded": 1}
    assert upstream_identical(client, expected) == [] and _manifest(client, "b")
    up.close()


def test_a_purge_the_file_system_refuses_is_held_and_finished_on_a_later_pass(world, monkeypatch):
    spool, url, client = world
    expected = _killed_inside_the_delete(spool, url, "b", "dir", 1)
    real = shutil.rmtree

    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    up = in_process_uploader(spool, url)  # settling does not raise
    assert up.trash.entries() == ["b"] and up.run_pass() == {"held": 1}
    assert up.journal.episode_state("b") == ("verified", "")
    monkeypatch.setattr(shutil, "rmtree", real)
    assert up.run_pass() == {}
    assert up.trash.entries() == [] and up.journal.episode_state("b") is None
    assert upstream_identical(client, expected) == [] and not episodes_in(spool)
    up.close()
