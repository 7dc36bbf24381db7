"""Property: whatever a kill left in the trash and whatever happened since, upstream and locally,
settling never loses a byte, never deletes an unverified copy, and never rewrites a directory's
manifest from a partly purged entry (hypothesis, fixed seed; one moto server for every example)."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.core.helpers_trash import killed_inside_the_delete, upstream_manifest
from tests.core.helpers_upload import (
    BUCKET,
    CREDS,
    PREFIX,
    episodes_in,
    in_process_uploader,
    moto_server,
    s3,
    upstream_identical,
)

_names = itertools.count()


@pytest.fixture(scope="module")
def server():
    with pytest.MonkeyPatch.context() as mp:
        for k, v in CREDS.items():
            mp.setenv(k, v)
        with moto_server() as url:
            yield url, s3(url)


def _trash_files(spool: Path) -> dict[str, bytes]:
    trash = spool / ".robodata-upload" / "trash"
    return {str(p.relative_to(trash)): p.read_bytes() for p in sorted(trash.rglob("*")) if p.is_file()}


@seed(2031)
@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["file", "dir"]),
    purged=st.integers(0, 6),
    upstream=st.sampled_from(["kept", "deleted", "overwritten", "manifest_gone"]),
    appended=st.booleans(),
    offline_first=st.booleans(),
)
def test_settling_any_interrupted_delete_keeps_every_byte(server, kind, purged, upstream, appended, offline_first):
    url, client = server
    purged = purged if kind == "dir" else 0
    with tempfile.TemporaryDirectory() as d:
        spool = Path(d) / "spool"
        spool.mkdir()
        name = f"e{next(_names)}" + (".mcap" if kind == "file" else "")
        expected = killed_inside_the_delete(spool, url, name, kind, purged)
        keys = sorted(expected)
        manifest = upstream_manifest(client, name) if kind == "dir" else b""
        left = _trash_files(spool)
        whole = len(left) == len(expected)
        if upstream == "deleted":
            client.delete_object(Bucket=BUCKET, Key=keys[0])
        elif upstream == "overwritten":
            client.put_object(Bucket=BUCKET, Key=keys[0], Body=b"someone else's bytes")
        elif upstream == "manifest_gone" and kind == "dir":
            client.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/{name}/_UPLOADED.json")
        tampered = upstream in ("deleted", "overwritten") or (upstream == "manifest_gone" and kind == "dir")
        trash = spool / ".robodata-upload" / "trash"
        appended = appended and bool(left)
        if appended:  # a writer that still held a file open
            first = sorted(p for p in trash.rglob("*") if p.is_file())[0]
            with open(first, "ab") as f:
                f.write(b"+late")
            rel = first.relative_to(trash / name).as_posix() if kind == "dir" else ""
            key = f"{PREFIX}/{name}/{rel}" if rel else f"{PREFIX}/{name}"
            expected[key] += b"+late"
            left = _trash_files(spool)
        if offline_first:
            in_process_uploader(spool, "http://127.0.0.1:9").close()  # nothing listens: nothing purged
            assert _trash_files(spool) == left or (whole and not _trash_files(spool))
        up = in_process_uploader(spool, url)
        for _ in range(3):
            up.run_pass()
        held = up.trash.entries()
        if whole or (not tampered and not appended):
            # every byte upstream as it is locally now, nothing left behind
            assert held == [] and not episodes_in(spool), (held, os.listdir(spool))
            assert upstream_identical(client, expected) == []
            if kind == "dir" and not (tampered or appended or offline_first):  # purged there, not re-sent
                assert upstream_manifest(client, name) == manifest
        else:  # partly purged and not re-verifiable: held untouched, its manifest never rewritten
            assert held == [name] and _trash_files(spool) == left and not episodes_in(spool)
            if upstream != "manifest_gone":
                assert upstream_manifest(client, name) == manifest
        up.close()
