"""The uploader: one pass over the spool uploads, verifies, then deletes finished episodes.

Per object: hash the local file as it is now (sha256 + part MD5s; compared with the journal)
-> upload (single PUT or multipart, resuming an open upload: parts the server lists with the
right ETag are skipped) -> verify now (HEAD: size, ETag, sha256 metadata; optionally a full
re-download) -> journal. Per episode: every object verified in this call (+ manifest for
directories), local files unchanged since they were hashed -> journal "verified" -> atomic
rename into the trash -> the files there are still those that were hashed -> trash purged ->
journal row dropped. A kill inside that delete is settled by the next start (robodata.upload.trash).

The journal's "verified" is never a reason to delete: a process that resumes a verified
episode (killed before its delete) hashes the local files again and re-reads every object
upstream; whatever no longer matches (deleted, overwritten or truncated upstream, bytes
appended locally) is uploaded again first. A SIGKILL anywhere leaves either a resumable
upload or an episode that the next start re-verifies; never a deleted-but-unverified one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from robodata.errors import RobodataError
from robodata.upload.client import make_client
from robodata.upload.config import UploadConfig
from robodata.upload.digest import Digest, digest_file, expected_etag
from robodata.upload.journal import FileRecord, Journal
from robodata.upload.keys import UnsafeKeyError, episode_key
from robodata.upload.retry import Retrier, TransientError
from robodata.upload.spool import (
    MANIFEST_NAME,
    Episode,
    LocalFile,
    SpoolError,
    describe,
    ready_names,
    unchanged,
)
from robodata.upload.throttle import TokenBucket
from robodata.upload.transfer import LocalChangedError, Transfer, b64md5
from robodata.upload.trash import Trash
from robodata.upload.verify import UpstreamMismatch, UpstreamMissing, Verifier, matches

log = logging.getLogger("robodata.upload")

__all__ = ["ConflictError", "LocalChangedError", "Uploader"]


class ConflictError(RobodataError):
    """Upstream already holds a different object under this key that this uploader did not write."""


def _label(name: str) -> str:
    """A printable, storable form of a (possibly undecodable) file name."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class Uploader:
    """Stateful: state_dict() holds the journal (open uploads, part digests, counters)."""

    def __init__(self, cfg: UploadConfig, client: Any = None, on_bytes: Callable[[int], None] | None = None):
        self.cfg = cfg
        self.spool = Path(cfg.spool)
        if not self.spool.is_dir():
            raise RobodataError(f"spool directory {self.spool} does not exist")
        cfg.state_path.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(cfg.state_path / "journal.sqlite")
        self.client = client if client is not None else make_client(cfg)
        throttle = TokenBucket(cfg.bandwidth_bytes_per_s) if cfg.bandwidth_bytes_per_s else None
        self.retrier = Retrier(cfg.retry, on_retry=self._on_retry)
        self.verifier = Verifier(self.client, cfg.bucket, self.retrier, self.journal, cfg.verify)
        self.transfer = Transfer(
            self.client, cfg.bucket, self.retrier, self.journal, self.verifier, throttle, self._sent
        )
        self.trash = Trash(cfg.trash_path, self.spool, self.journal, self.verifier, cfg.site_prefix, cfg.held_path)
        self.on_bytes = on_bytes
        self.current: str | None = None
        # key -> (episode, file identity, digest) of files this process hashed; see _digest
        self._digests: dict[str, tuple[str, tuple[int, int, int, int], Digest]] = {}
        self._held_at_start: list[str] | None = self._recover()  # the first pass reports it, not settle again

    # lifecycle --------------------------------------------------------------------------
    def _on_retry(self, what: str, exc: BaseException) -> None:
        log.warning("retrying %s: %s", what, exc)
        self.journal.bump(retries=1)

    def _recover(self) -> list[str]:
        """Settle deletes a kill interrupted; returns the trash entries held (see robodata.upload.trash).
        Nothing in the trash is purged before its upstream copy is re-verified as it is now."""
        held = self.trash.settle()
        for name, _ in self.journal.episodes("verified"):
            if name not in held and not os.path.lexists(self.spool / name):  # the kill came after the purge
                self.trash.purge(name)
        return held

    def close(self) -> None:
        self.journal.close()

    def state_dict(self) -> dict[str, Any]:
        return {"journal": self.journal.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.journal.load_state_dict(state_dict["journal"])

    # one pass ---------------------------------------------------------------------------
    def ready(self) -> list[str]:
        return ready_names(self.spool, self.cfg.completion, self.cfg.min_age_s)

    def run_pass(self, names: list[str] | None = None) -> dict[str, int]:
        """Upload every ready episode once. Returns outcome -> count."""
        outcomes: dict[str, int] = {}
        held, self._held_at_start = self._held_at_start, None
        if held is None and self.trash.entries():  # held by an earlier pass's settle: try again
            held = self._recover()
        if held:
            outcomes["held"] = len(held)
        self._prune()
        for name in self.ready() if names is None else names:
            out = self.process(name)
            outcomes[out] = outcomes.get(out, 0) + 1
            if out == "offline":  # no network: the rest waits for the next pass
                break
        self.journal.bump(passes=1)
        self.journal.flush()
        return outcomes

    def process(self, name: str) -> str:
        """Upload, verify, delete one episode: 'uploaded', 'rejected', 'conflict', 'failed' or 'offline'."""
        self.current = name
        try:
            ep = describe(self.spool, name)
            keys = [episode_key(self.cfg.site_prefix, name, f.relpath) for f in ep.files]
            if ep.is_dir:
                episode_key(self.cfg.site_prefix, name, MANIFEST_NAME)
        except (UnsafeKeyError, SpoolError) as exc:
            return self._mark(name, "rejected", str(exc))
        except FileNotFoundError:
            return "gone"
        try:
            prev = self.journal.episode_state(name)
            if prev is None:  # a conflict/rejection stays recorded (and counted once) until it clears
                self.journal.set_episode(name, "uploading")
            # Always the whole path, also for an episode the journal calls verified (a kill between
            # "verified" and the delete): the local files and upstream are checked as they are now.
            for key, lf in zip(keys, ep.files, strict=True):
                self._object(name, key, lf)
            if ep.is_dir:
                self._manifest(ep, keys)
            if describe(self.spool, name) != ep:
                raise LocalChangedError(f"episode {name!r} changed while uploading")
            if prev is None or prev[0] != "verified":
                self.journal.set_episode(
                    name, "verified", counters={"episodes_verified": 1, "bytes_verified": ep.bytes}
                )
            self._delete(ep)
            return "uploaded"
        except ConflictError as exc:
            return self._mark(name, "conflict", str(exc))
        except (TransientError, LocalChangedError, ClientError, OSError) as exc:
            log.error("episode %r stays local for now: %s", name, exc)
            self.journal.bump(episode_failures=1)
            return "offline" if isinstance(exc.__cause__, BotoConnectionError) else "failed"
        finally:
            self.current = None
            self.journal.flush()

    def _prune(self) -> None:
        """Forget journal rows of episodes that left the spool without us (an operator removed them)."""
        present = {_label(n) for n in os.listdir(self.spool)}
        self._digests = {k: v for k, v in self._digests.items() if _label(v[0]) in present}
        for state in ("rejected", "conflict", "uploading"):
            for name, _ in self.journal.episodes(state):
                if name not in present:
                    for key, _id in self.journal.open_uploads():
                        rec = self.journal.file(key)
                        if rec is not None and rec.episode == name:
                            self.transfer.abort(rec)
                    self.journal.drop_episode(name)

    def _mark(self, name: str, state: str, detail: str) -> str:
        name = _label(name)
        prev = self.journal.episode_state(name)
        if prev is None or prev != (state, detail):
            log.error("episode %r %s: %s", name, state, detail)
            self.journal.set_episode(name, state, detail, counters={f"episodes_{state}": 1})
        return state

    # objects ----------------------------------------------------------------------------
    def _object(self, episode: str, key: str, lf: LocalFile) -> None:
        """Make the object under `key` hold the local file as it is now, checked upstream now.

        The local file is hashed afresh (once per process; see _digest) and compared with the
        journal; the upstream object is re-read (HEAD) in this call whatever the journal says.
        """
        rec = self.journal.file(key)
        d = self._digest(episode, key, lf, rec.part_size if rec else self.cfg.part_size_for(lf.size))
        owned = False
        if rec is not None and (rec.size, rec.sha256, rec.etag) != (d.size, d.sha256, d.etag):
            # Changed since it was journaled (bytes appended after a crash, a rewrite): start over.
            # The key is ours if we completed an upload to it, so the new bytes may replace it.
            owned = rec.state != "hashed" or self._upstream_is(key, rec)
            log.warning("%s changed since it was hashed; uploading it again", lf.path)
            self.transfer.abort(rec)
            self.journal.forget_file(key)
            rec = None
        if rec is None:
            rec = self._record(episode, key, lf, d, owned)
        for attempt in range(2):
            if rec.state == "hashed":
                self.transfer.send(rec, lf.path)
                self.journal.set_file_state(key, "completed")
            try:
                self.verifier.verify(key, rec.size, rec.etag, rec.sha256)
                break
            except (UpstreamMissing, UpstreamMismatch) as exc:  # deleted, overwritten, truncated upstream
                if attempt:
                    raise
                log.warning("%s; uploading it again", exc)
                rec = replace(rec, state="hashed", upload_id=None)
        if not unchanged(lf):
            raise LocalChangedError(f"{lf.path} changed after it was hashed")
        self.journal.set_file_state(key, "verified", counters={"objects_verified": 1})

    def _digest(self, episode: str, key: str, lf: LocalFile, part_size: int) -> Digest:
        """sha256 + part MD5s of the file as it is now. Every process hashes a file afresh; within
        one process the digest is reused while size, mtime, ctime and inode are unchanged (so a
        daemon whose network is down does not re-read its spool every pass)."""
        memo = self._digests.get(key)
        if memo is not None and memo[1] == lf.identity and memo[2].part_size == part_size:
            return memo[2]
        d = digest_file(lf.path, part_size)
        if d.size != lf.size or not unchanged(lf):
            raise LocalChangedError(f"{lf.path} changed while it was hashed")
        self._digests[key] = (episode, lf.identity, d)
        return d

    def _upstream_is(self, key: str, rec: FileRecord) -> bool:
        head = self.verifier.head(key)
        return head is not None and matches(head, rec.size, rec.etag, rec.sha256)

    def _record(self, episode: str, key: str, lf: LocalFile, d: Digest, owned: bool) -> FileRecord:
        state = "hashed"
        head = self.verifier.head(key)
        if head is not None:
            if matches(head, d.size, d.etag, d.sha256):
                state = "completed"  # already upstream (e.g. the journal was lost); verified below
            elif not owned:
                raise ConflictError(
                    f"s3://{self.cfg.bucket}/{key} already exists with other content; "
                    "refusing to overwrite an object this uploader did not write"
                )
        rec = FileRecord(key, episode, d.size, lf.mtime_ns, d.part_size, d.sha256, d.etag, None, state)
        self.journal.put_file(rec, list(d.part_md5s))
        return rec

    def _sent(self, n: int, resumed: bool) -> None:
        if not resumed:
            self.journal.bump(bytes_uploaded=n)
        if self.on_bytes:
            self.on_bytes(n)

    def _manifest(self, ep: Episode, keys: list[str]) -> None:
        key = episode_key(self.cfg.site_prefix, ep.name, MANIFEST_NAME)
        recs = [self.journal.file(k) for k in keys]
        body = json.dumps(
            {
                "episode": ep.name,
                "site_prefix": self.cfg.site_prefix,
                "uploaded_at": time.time(),
                "files": [
                    {"path": f.relpath, "key": r.key, "size": r.size, "sha256": r.sha256}
                    for f, r in zip(ep.files, recs, strict=True)
                    if r is not None
                ],
            },
            indent=1,
            sort_keys=True,
        ).encode()
        md5, b64 = b64md5(body)
        sha = hashlib.sha256(body).hexdigest()
        self.transfer.put_bytes(key, body, sha, md5, b64)
        self.verifier.verify(key, len(body), expected_etag([md5], False), sha)

    # deletion ---------------------------------------------------------------------------
    def _delete(self, ep: Episode) -> None:
        """Only called once this call verified every object against the local files as they are."""
        name = ep.name
        assert self.journal.episode_state(name) == ("verified", ""), name
        if os.path.lexists(self.trash.path / name):  # left by a failed delete in this process: back, unpurged
            self.trash.restore(name)
            raise LocalChangedError(f"episode {name!r}: an earlier copy was in the trash; it is back in the spool")
        self.trash.take(name)
        try:
            moved = describe(self.trash.path, name).contents()
        except (OSError, SpoolError):
            moved = None
        if moved != ep.contents():  # written to between the last check and the rename: put it back
            back = self.trash.restore(name)
            raise LocalChangedError(f"episode {name!r} changed just before its delete; it stays local as {back.name}")
        self.trash.purge(name)
        for f in ep.files:
            self._digests.pop(episode_key(self.cfg.site_prefix, name, f.relpath), None)
