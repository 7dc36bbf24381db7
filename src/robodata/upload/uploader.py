"""The uploader: one pass over the spool uploads, verifies, then deletes finished episodes.

Per object: hash locally (sha256 + part MD5s, journaled) -> upload (single PUT or
multipart, resuming an open upload: parts the server lists with the right ETag are skipped)
-> verify (HEAD: size, ETag, sha256 metadata; optionally a full re-download) -> journal.
Per episode: every object verified (+ manifest for directories), local files unchanged ->
journal "verified" -> atomic rename into the trash -> journal row dropped -> trash purged.
A SIGKILL anywhere leaves either a resumable upload or a verified episode whose delete is
finished on the next start; never a deleted-but-unverified one.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from robodata.errors import RobodataError
from robodata.upload.client import make_client
from robodata.upload.config import UploadConfig
from robodata.upload.digest import Digest, clean_etag, digest_file, expected_etag, read_part
from robodata.upload.journal import FileRecord, Journal
from robodata.upload.keys import UnsafeKeyError, episode_key
from robodata.upload.retry import IntegrityError, Retrier, TransientError
from robodata.upload.spool import (
    DONE_SUFFIX,
    MANIFEST_NAME,
    Episode,
    LocalFile,
    SpoolError,
    describe,
    ready_names,
    unchanged,
)
from robodata.upload.throttle import ThrottledBody, TokenBucket
from robodata.upload.verify import Verifier, matches, no_such

log = logging.getLogger("robodata.upload")


class ConflictError(RobodataError):
    """Upstream already holds a different object under this key that this uploader did not write."""


class LocalChangedError(RobodataError):
    """A local file changed after it was hashed (the writer broke the protocol); retried later."""


def _b64md5(data: bytes) -> tuple[str, str]:
    d = hashlib.md5(data)
    return d.hexdigest(), base64.b64encode(d.digest()).decode()


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
        self.trash = cfg.state_path / "trash"
        self.journal = Journal(cfg.state_path / "journal.sqlite")
        self.client = client if client is not None else make_client(cfg)
        self.bucket = TokenBucket(cfg.bandwidth_bytes_per_s) if cfg.bandwidth_bytes_per_s else None
        self.retrier = Retrier(cfg.retry, on_retry=self._on_retry)
        self.verifier = Verifier(self.client, cfg.bucket, self.retrier, self.journal, cfg.verify)
        self.on_bytes = on_bytes
        self.current: str | None = None
        self._recover()

    # lifecycle --------------------------------------------------------------------------
    def _on_retry(self, what: str, exc: BaseException) -> None:
        log.warning("retrying %s: %s", what, exc)
        self.journal.bump(retries=1)

    def _recover(self) -> None:
        """Finish deletes a kill interrupted. Everything in the trash was verified first."""
        if self.trash.exists():
            shutil.rmtree(self.trash)
        for name, _ in self.journal.episodes("verified"):
            if not os.path.lexists(self.spool / name):
                self._remove_marker(name)
                self.journal.drop_episode(name, counters={"episodes_deleted": 1})

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
            if prev is None or prev[0] != "verified":
                if prev is None:  # a conflict/rejection stays recorded (and counted once) until it clears
                    self.journal.set_episode(name, "uploading")
                for key, lf in zip(keys, ep.files, strict=True):
                    self._object(name, key, lf)
                if ep.is_dir:
                    self._manifest(ep, keys)
                if describe(self.spool, name) != ep:
                    raise LocalChangedError(f"episode {name!r} changed while uploading")
                self.journal.set_episode(
                    name, "verified", counters={"episodes_verified": 1, "bytes_verified": ep.bytes}
                )
            self._delete(name)
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
        for state in ("rejected", "conflict", "uploading"):
            for name, _ in self.journal.episodes(state):
                if name not in present:
                    for key, _id in self.journal.open_uploads():
                        rec = self.journal.file(key)
                        if rec is not None and rec.episode == name:
                            self._abort(rec)
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
        rec = self.journal.file(key)
        if rec is not None and (rec.size, rec.mtime_ns) != (lf.size, lf.mtime_ns):
            self._abort(rec)
            self.journal.forget_file(key)
            rec = None
        if rec is None:
            rec = self._hash(episode, key, lf)
        if rec.state == "hashed":
            if rec.size > rec.part_size:
                self._multipart(rec, lf)
            else:
                self._put(rec, lf)
            self.journal.set_file_state(key, "completed")
        if rec.state != "verified":
            self.verifier.verify(key, rec.size, rec.etag, rec.sha256)
            if not unchanged(lf):
                raise LocalChangedError(f"{lf.path} changed after it was hashed")
            self.journal.set_file_state(key, "verified", counters={"objects_verified": 1})

    def _hash(self, episode: str, key: str, lf: LocalFile) -> FileRecord:
        d: Digest = digest_file(lf.path, self.cfg.part_size_for(lf.size))
        if d.size != lf.size or not unchanged(lf):
            raise LocalChangedError(f"{lf.path} changed while it was hashed")
        state = "hashed"
        head = self.verifier.head(key)
        if head is not None:
            if matches(head, d.size, d.etag, d.sha256):
                state = "completed"  # already upstream (e.g. the journal was lost); verify again below
            else:
                raise ConflictError(
                    f"s3://{self.cfg.bucket}/{key} already exists with other content; "
                    "refusing to overwrite an object this uploader did not write"
                )
        rec = FileRecord(key, episode, d.size, lf.mtime_ns, d.part_size, d.sha256, d.etag, None, state)
        self.journal.put_file(rec, list(d.part_md5s))
        return rec

    def _put(self, rec: FileRecord, lf: LocalFile) -> None:
        with open(lf.path, "rb") as f:
            data = f.read(rec.part_size + 1)
        md5, b64 = _b64md5(data)
        if len(data) != rec.size or md5 != rec.etag:
            raise LocalChangedError(f"{lf.path} changed after it was hashed")
        self._put_bytes(rec.key, data, rec.sha256, md5, b64)

    def _put_bytes(self, key: str, data: bytes, sha256: str, md5: str, b64: str) -> None:
        def go() -> None:
            r = self.client.put_object(
                Bucket=self.cfg.bucket,
                Key=key,
                Body=ThrottledBody(data, self.bucket),
                ContentMD5=b64,
                Metadata={"sha256": sha256},
            )
            if clean_etag(r.get("ETag")) != md5:
                raise IntegrityError(f"PUT {key}: server ETag {r.get('ETag')!r} != local MD5 {md5}")

        self.retrier.call(f"put {key}", go)
        self._sent(len(data))

    def _sent(self, n: int) -> None:
        self.journal.bump(bytes_uploaded=n)
        if self.on_bytes:
            self.on_bytes(n)

    def _multipart(self, rec: FileRecord, lf: LocalFile) -> None:
        md5s = self.journal.part_md5s(rec.key)
        upload_id, done = rec.upload_id, {}
        if upload_id:
            try:
                done = self._list_parts(rec.key, upload_id)
            except ClientError as exc:
                if not no_such(exc, "NoSuchUpload", "404"):
                    raise
                upload_id = None
        if upload_id is None:
            upload_id = self.retrier.call(
                f"create {rec.key}",
                lambda: self.client.create_multipart_upload(
                    Bucket=self.cfg.bucket, Key=rec.key, Metadata={"sha256": rec.sha256}
                )["UploadId"],
            )
            self.journal.set_upload_id(rec.key, upload_id)
        for n, md5 in enumerate(md5s, start=1):
            if done.get(n) == md5:
                self.journal.bump(parts_resumed=1)
                if self.on_bytes:
                    self.on_bytes(min(rec.part_size, rec.size - (n - 1) * rec.part_size))
                continue
            self._part(rec, lf, upload_id, n, md5)
        parts = [{"PartNumber": n, "ETag": f'"{m}"'} for n, m in enumerate(md5s, start=1)]
        try:
            self.retrier.call(
                f"complete {rec.key}",
                lambda: self.client.complete_multipart_upload(
                    Bucket=self.cfg.bucket, Key=rec.key, UploadId=upload_id, MultipartUpload={"Parts": parts}
                ),
            )
        except ClientError as exc:
            if not no_such(exc, "NoSuchUpload"):
                raise
            # A retried complete whose first answer was lost: fine if the object is there and right.
            head = self.verifier.head(rec.key)
            if head is None or not matches(head, rec.size, rec.etag, rec.sha256):
                self.journal.set_upload_id(rec.key, None)
                raise TransientError(f"complete {rec.key}: upload vanished; starting over next pass") from exc

    def _part(self, rec: FileRecord, lf: LocalFile, upload_id: str, n: int, md5: str) -> None:
        data = read_part(lf.path, n, rec.part_size)
        got, b64 = _b64md5(data)
        if got != md5:
            raise LocalChangedError(f"{lf.path} part {n} changed after it was hashed")

        def go() -> None:
            r = self.client.upload_part(
                Bucket=self.cfg.bucket,
                Key=rec.key,
                UploadId=upload_id,
                PartNumber=n,
                Body=ThrottledBody(data, self.bucket),
                ContentMD5=b64,
            )
            if clean_etag(r.get("ETag")) != md5:
                raise IntegrityError(f"part {n} of {rec.key}: server ETag {r.get('ETag')!r} != local MD5 {md5}")

        self.retrier.call(f"part {n} of {rec.key}", go)
        self._sent(len(data))

    def _list_parts(self, key: str, upload_id: str) -> dict[int, str]:
        out: dict[int, str] = {}
        marker = 0
        while True:
            r = self.retrier.call(
                f"list parts {key}",
                lambda marker=marker: self.client.list_parts(
                    Bucket=self.cfg.bucket, Key=key, UploadId=upload_id, PartNumberMarker=marker
                ),
            )
            for p in r.get("Parts", []):
                out[p["PartNumber"]] = clean_etag(p["ETag"])
            if not r.get("IsTruncated"):
                return out
            marker = r["NextPartNumberMarker"]

    def _abort(self, rec: FileRecord) -> None:
        if rec.upload_id:
            try:
                self.client.abort_multipart_upload(Bucket=self.cfg.bucket, Key=rec.key, UploadId=rec.upload_id)
            except ClientError as exc:  # best effort: a lifecycle rule reaps what is left
                log.warning("abort %s: %s", rec.key, exc)

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
        md5, b64 = _b64md5(body)
        sha = hashlib.sha256(body).hexdigest()
        self._put_bytes(key, body, sha, md5, b64)
        self.verifier.verify(key, len(body), expected_etag([md5], False), sha)

    # deletion ---------------------------------------------------------------------------
    def _remove_marker(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.spool / (name + DONE_SUFFIX))

    def _delete(self, name: str) -> None:
        """Only called once the journal says the episode is verified."""
        assert self.journal.episode_state(name) == ("verified", ""), name
        self.trash.mkdir(parents=True, exist_ok=True)
        target = self.trash / name
        if os.path.lexists(target):
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        os.rename(self.spool / name, target)  # atomic: the episode leaves the spool in one step
        self._remove_marker(name)
        self.journal.drop_episode(name, counters={"episodes_deleted": 1})
        shutil.rmtree(target) if target.is_dir() else target.unlink()
