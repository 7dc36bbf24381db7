"""A kill inside a delete (after the rename into the trash, before the journal row's drop) is
settled by the next start: the purge is finished once the upstream copy is re-verified as it is
now, a whole entry that cannot be re-verified goes back into the spool, and a partly purged
directory that cannot be re-verified is held in the trash, untouched, and never re-uploaded with
a manifest that lacks the purged files."""

from __future__ import annotations

import shutil

import pytest

from robodata.upload.spool import held_in
from robodata.upload.status import collect, prometheus
from tests.core.helpers_trash import killed_inside_the_delete, trash_of, upstream_manifest
from tests.core.helpers_upload import (
    BUCKET,
    PREFIX,
    episodes_in,
    in_process_uploader,
    upload_world,
    upstream_identical,
)

world = pytest.fixture(upload_world)


@pytest.mark.parametrize(("kind", "purged"), [("file", 0), ("dir", 0), ("dir", 1), ("dir", 99)])
def test_the_next_start_finishes_the_delete_without_the_episode_re_entering_the_spool(world, kind, purged):
    spool, url, client = world
    name = "a.mcap" if kind == "file" else "b"
    expected = killed_inside_the_delete(spool, url, name, kind, purged)
    manifest = upstream_manifest(client, name) if kind == "dir" else None
    up = in_process_uploader(spool, url)  # the next start settles the trash
    assert not episodes_in(spool), "the episode came back into the spool"
    assert not any(trash_of(spool).iterdir())
    assert up.journal.episode_state(name) is None and up.journal.files_of(name) == []
    assert up.journal.counters().get("episodes_deleted") == 1
    assert up.run_pass() == {}
    if manifest is not None:
        assert upstream_manifest(client, name) == manifest, "the manifest was rewritten"
    assert upstream_identical(client, expected) == []
    up.close()


def test_a_partly_purged_directory_whose_upstream_copy_lost_an_object_is_held_until_it_verifies(world, monkeypatch):
    spool, url, client = world
    expected = killed_inside_the_delete(spool, url, "b", "dir", 1)
    lost = sorted(expected)[-1]
    client.delete_object(Bucket=BUCKET, Key=lost)
    manifest = upstream_manifest(client, "b")
    before = sorted(p.relative_to(trash_of(spool)) for p in trash_of(spool).rglob("*"))
    settles = _count_settles(monkeypatch)
    up = in_process_uploader(spool, url)
    assert settles[0] == 1, "the start re-checks the held entry once"
    assert sorted(p.relative_to(trash_of(spool)) for p in trash_of(spool).rglob("*")) == before, "held untouched"
    assert not episodes_in(spool), "a partly purged directory must not be uploaded again"
    failures = up.journal.counters().get("verify_failures", 0)
    assert up.run_pass() == {"held": 1}
    assert settles[0] == 1, "the first pass reports what the start found, without re-checking it"
    assert up.run_pass() == {"held": 1}
    assert settles[0] == 2, "each later pass tries it again"
    assert up.journal.counters().get("verify_failures", 0) == failures, "a held entry is not counted every pass"
    in_trash = up.trash.entries()
    status = collect(up.journal, up.ready(), held_in(in_trash, up.cfg.held_path), in_trash)
    assert status["held"] == ["b"] and "robodata_upload_episodes_held_in_trash 1" in prometheus(status)
    assert status["held_reasons"] == {"b": f"s3://{BUCKET}/{lost} is not upstream as it was verified"}
    assert up.journal.episode_state("b") == ("verified", "")
    assert upstream_manifest(client, "b") == manifest
    client.put_object(Bucket=BUCKET, Key=lost, Body=expected[lost], Metadata=_meta(up, lost))
    assert up.run_pass() == {}, "re-verified on a later pass: the purge is finished"
    assert not any(trash_of(spool).iterdir()) and up.journal.episode_state("b") is None
    assert upstream_identical(client, expected) == []
    up.close()


def _count_settles(monkeypatch) -> list[int]:
    """How many times the trash was settled (each re-checks its entries upstream)."""
    from robodata.upload.trash import Trash

    count, real = [0], Trash.settle

    def settle(self):
        count[0] += 1
        return real(self)

    monkeypatch.setattr(Trash, "settle", settle)
    return count


def _meta(up, key: str) -> dict[str, str]:
    return {"sha256": next(r.sha256 for r in up.journal.files_of("b") if r.key == key)}


def test_a_partly_purged_directory_is_held_while_upstream_is_unreachable(world, tmp_path):
    spool, url, client = world
    killed_inside_the_delete(spool, url, "b", "dir", 2)
    up = in_process_uploader(spool, "http://127.0.0.1:9")  # nothing listens there
    assert up.trash.entries() == ["b"] and not episodes_in(spool)
    up.close()
    up = in_process_uploader(spool, url)
    assert up.trash.entries() == [] and up.journal.episode_state("b") is None
    up.close()


def test_a_whole_entry_changed_in_the_trash_goes_back_and_is_uploaded_again(world):
    spool, url, client = world
    expected = killed_inside_the_delete(spool, url, "a.mcap", "file", 0)
    with open(trash_of(spool) / "a.mcap", "ab") as f:  # a writer that still held the file open
        f.write(b"late bytes")
    expected[f"{PREFIX}/a.mcap"] += b"late bytes"
    up = in_process_uploader(spool, url)
    assert episodes_in(spool) == {"a.mcap"} and up.trash.entries() == []
    assert up.run_pass() == {"uploaded": 1}
    assert upstream_identical(client, expected) == []
    up.close()


def test_a_whole_entry_whose_upstream_manifest_is_gone_goes_back_and_is_uploaded_again(world):
    spool, url, client = world
    expected = killed_inside_the_delete(spool, url, "b", "dir", 0)
    client.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/b/_UPLOADED.json")
    up = in_process_uploader(spool, url)
    assert episodes_in(spool) == {"b"}
    assert up.run_pass() == {"uploaded": 1}
    assert upstream_identical(client, expected) == [] and upstream_manifest(client, "b")
    up.close()


def test_a_purge_the_file_system_refuses_is_held_and_finished_on_a_later_pass(world, monkeypatch):
    spool, url, client = world
    expected = killed_inside_the_delete(spool, url, "b", "dir", 1)
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
