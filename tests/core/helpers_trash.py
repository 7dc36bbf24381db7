"""Interrupted deletes for the upload tests: an in-process uploader "killed" inside its delete."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from tests.core.helpers_upload import BUCKET, PREFIX, episodes_in, in_process_uploader, write_episode


class Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs in the dying process."""


def killed_inside_the_delete(spool, url, name: str, kind: str, purged: int) -> dict[str, bytes]:
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
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shutil, "rmtree", rmtree)
        with pytest.raises(Killed):
            up.run_pass()
    up.journal.db.close()  # the dead process's connection; committed rows stay
    assert done[0] == 1 and not episodes_in(spool)
    return expected


def upstream_manifest(client, name: str) -> bytes:
    """The directory episode's `_UPLOADED.json` as it is upstream."""
    return client.get_object(Bucket=BUCKET, Key=f"{PREFIX}/{name}/_UPLOADED.json")["Body"].read()


def trash_of(spool: Path) -> Path:
    return spool / ".robodata-upload" / "trash"
