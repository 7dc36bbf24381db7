"""The trash: a verified episode leaves the spool by one rename into it, and is purged there.

A kill can stop a delete anywhere between that rename and the journal row's drop: the entry is
then whole, or a directory partly removed. Every start settles what it finds (`Trash.settle`):

* journal row "verified", every file still there hashes to its record, every record is upstream
  as recorded and a directory's manifest lists exactly those records -> the purge is finished.
  The upstream copy was re-verified as it is now, and the episode never re-enters the spool.
* otherwise a whole entry goes back into the spool, where the next pass uploads what changed
  (also when upstream could not be reached: the pass decides, as for any episode);
* a partly purged directory that cannot be re-verified stays in the trash, untouched ("held",
  in the status and in `upload once`'s outcome) and is tried again each pass. Putting it back
  would upload a manifest that lacks the purged files. So does an entry the file system refuses
  to purge or move back (an OSError): it never stops the pass.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from robodata.errors import RobodataError
from robodata.upload.digest import digest_file
from robodata.upload.journal import FileRecord, Journal
from robodata.upload.keys import episode_key
from robodata.upload.spool import DONE_SUFFIX, MANIFEST_NAME, describe, entries_in
from robodata.upload.status import write_atomic
from robodata.upload.verify import Verifier, matches

log = logging.getLogger("robodata.upload")


class Trash:
    def __init__(self, path: Path, spool: Path, journal: Journal, verifier: Verifier, site_prefix: str, record: Path):
        """`record`: where each settle writes the entries it held, with why (`held_in`)."""
        self.path, self.spool, self.journal, self.verifier = path, spool, journal, verifier
        self.site_prefix, self.record = site_prefix, record

    def entries(self) -> list[str]:
        return entries_in(self.path)

    def take(self, name: str) -> Path:
        """Rename spool/name into the trash (atomic: the episode leaves the spool in one step)."""
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / name
        os.rename(self.spool / name, target)
        return target

    def restore(self, entry: str) -> Path:
        """Move trash/entry back into the spool (under a fresh name if a new entry took its own)."""
        back = self.spool / entry
        if os.path.lexists(back):  # keep both, never purge
            back = self.spool / f"{entry}.restored-{time.time_ns()}"
        os.rename(self.path / entry, back)
        return back

    def purge(self, name: str) -> None:
        """Purge first, then forget: a kill before the journal row's drop leaves the row (and
        maybe part of the entry), so the next start settles it again."""
        target = self.path / name
        if os.path.lexists(target):
            shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.spool / (name + DONE_SUFFIX))
        self.journal.drop_episode(name, counters={"episodes_deleted": 1})

    def settle(self) -> list[str]:
        """Finish, undo or hold every delete a kill interrupted; returns the entries held (and
        records them with why in `record`)."""
        held: dict[str, str] = {}
        for entry in self.entries():
            whole, problem = self._whole(entry), ""
            try:
                problem = self._problem(entry)
            except (RobodataError, ClientError, BotoCoreError, OSError) as exc:
                problem = f"could not be re-verified: {exc}"
            try:
                if not problem:
                    self.purge(entry)
                    log.info("finished the delete of %r after re-verifying its upstream copy", entry)
                    continue
                if whole:
                    back = self.restore(entry)
                    log.warning("episode %r is back in the spool as %s: %s", entry, back.name, problem)
                    continue
            except OSError as exc:  # a file system refusing the purge or the rename: tried again next pass
                problem = f"{problem or 'verified'}, but {exc}"
            held[entry] = problem
            log.error("episode %r stays in %s: %s", entry, self.path, problem)
        write_atomic(self.record, json.dumps(held, indent=1, sort_keys=True))
        return sorted(held)

    def _whole(self, name: str) -> bool:
        """False only when the entry provably lost recorded files to an interrupted purge."""
        if self.journal.episode_state(name) != ("verified", ""):
            return True
        try:
            local = {episode_key(self.site_prefix, name, f.relpath) for f in describe(self.path, name).files}
        except (RobodataError, OSError):
            return True
        return {r.key for r in self.journal.files_of(name)} <= local

    def _problem(self, name: str) -> str:
        """Why the purge may not be finished; "" when the entry and its upstream copy re-verify."""
        recs = {r.key: r for r in self.journal.files_of(name)}
        if self.journal.episode_state(name) != ("verified", "") or not recs:
            return "its journal row is not 'verified'"
        ep = describe(self.path, name)
        for f in ep.files:
            rec = recs.get(episode_key(self.site_prefix, name, f.relpath))
            if rec is None:
                return f"{f.relpath!r} was not uploaded"
            d = digest_file(f.path, rec.part_size)
            if (d.size, d.sha256, d.etag) != (rec.size, rec.sha256, rec.etag):
                return f"{f.path} changed after it was verified"
        for rec in recs.values():  # a HEAD first: a mismatch is reported, not journaled (a held entry
            head = self.verifier.head(rec.key)  # would count it again every pass)
            if head is None or not matches(head, rec.size, rec.etag, rec.sha256):
                return f"s3://{self.verifier.bucket}/{rec.key} is not upstream as it was verified"
            if self.verifier.mode == "download":
                self.verifier.verify(rec.key, rec.size, rec.etag, rec.sha256)  # re-reads the bytes too
        if ep.is_dir and not self._manifest_lists(name, recs):
            return "its upstream manifest does not list the verified files"
        return ""

    def _manifest_lists(self, name: str, recs: dict[str, FileRecord]) -> bool:
        key = episode_key(self.site_prefix, name, MANIFEST_NAME)
        client, bucket = self.verifier.client, self.verifier.bucket
        try:
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except client.exceptions.NoSuchKey:
            return False
        try:
            listed = {(f["key"], f["size"], f["sha256"]) for f in json.loads(body)["files"]}
        except (ValueError, KeyError, TypeError):
            return False
        return listed == {(r.key, r.size, r.sha256) for r in recs.values()}
