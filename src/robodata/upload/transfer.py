"""Sending one object's bytes: a single PUT or a (resumable) multipart upload.

Every request body carries Content-MD5 and the ETag the server answers must equal the local
MD5 (otherwise the request is retried). A multipart upload whose id is journaled resumes:
parts the server lists with the right ETag are not sent again.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from robodata.errors import RobodataError
from robodata.upload.digest import clean_etag, read_part
from robodata.upload.journal import FileRecord, Journal
from robodata.upload.retry import IntegrityError, Retrier, TransientError
from robodata.upload.throttle import ThrottledBody, TokenBucket
from robodata.upload.verify import Verifier, matches, no_such

log = logging.getLogger("robodata.upload")


class LocalChangedError(RobodataError):
    """A local file changed after it was hashed (the writer broke the protocol); retried later."""


def b64md5(data: bytes) -> tuple[str, str]:
    d = hashlib.md5(data)
    return d.hexdigest(), base64.b64encode(d.digest()).decode()


class Transfer:
    """PUT / multipart upload of journaled objects; `on_sent(n)` is told of every byte sent or resumed."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        retrier: Retrier,
        journal: Journal,
        verifier: Verifier,
        throttle: TokenBucket | None,
        on_sent: Callable[[int, bool], None],
    ):
        self.client, self.bucket, self.retrier, self.journal = client, bucket, retrier, journal
        self.verifier, self.throttle, self.on_sent = verifier, throttle, on_sent

    def send(self, rec: FileRecord, path: Path) -> None:
        if rec.size > rec.part_size:
            self.multipart(rec, path)
        else:
            self.put(rec, path)

    def put(self, rec: FileRecord, path: Path) -> None:
        with open(path, "rb") as f:
            data = f.read(rec.part_size + 1)
        md5, b64 = b64md5(data)
        if len(data) != rec.size or md5 != rec.etag:
            raise LocalChangedError(f"{path} changed after it was hashed")
        self.put_bytes(rec.key, data, rec.sha256, md5, b64)

    def put_bytes(self, key: str, data: bytes, sha256: str, md5: str, b64: str) -> None:
        def go() -> None:
            r = self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=ThrottledBody(data, self.throttle),
                ContentMD5=b64,
                Metadata={"sha256": sha256},
            )
            if clean_etag(r.get("ETag")) != md5:
                raise IntegrityError(f"PUT {key}: server ETag {r.get('ETag')!r} != local MD5 {md5}")

        self.retrier.call(f"put {key}", go)
        self.on_sent(len(data), False)

    def multipart(self, rec: FileRecord, path: Path) -> None:
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
                    Bucket=self.bucket, Key=rec.key, Metadata={"sha256": rec.sha256}
                )["UploadId"],
            )
            self.journal.set_upload_id(rec.key, upload_id)
        for n, md5 in enumerate(md5s, start=1):
            if done.get(n) == md5:
                self.journal.bump(parts_resumed=1)
                self.on_sent(min(rec.part_size, rec.size - (n - 1) * rec.part_size), True)
                continue
            self._part(rec, path, upload_id, n, md5)
        parts = [{"PartNumber": n, "ETag": f'"{m}"'} for n, m in enumerate(md5s, start=1)]
        try:
            self.retrier.call(
                f"complete {rec.key}",
                lambda: self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=rec.key, UploadId=upload_id, MultipartUpload={"Parts": parts}
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

    def _part(self, rec: FileRecord, path: Path, upload_id: str, n: int, md5: str) -> None:
        data = read_part(path, n, rec.part_size)
        got, b64 = b64md5(data)
        if got != md5:
            raise LocalChangedError(f"{path} part {n} changed after it was hashed")

        def go() -> None:
            r = self.client.upload_part(
                Bucket=self.bucket,
                Key=rec.key,
                UploadId=upload_id,
                PartNumber=n,
                Body=ThrottledBody(data, self.throttle),
                ContentMD5=b64,
            )
            if clean_etag(r.get("ETag")) != md5:
                raise IntegrityError(f"part {n} of {rec.key}: server ETag {r.get('ETag')!r} != local MD5 {md5}")

        self.retrier.call(f"part {n} of {rec.key}", go)
        self.on_sent(len(data), False)

    def _list_parts(self, key: str, upload_id: str) -> dict[int, str]:
        out: dict[int, str] = {}
        marker = 0
        while True:

            def page(marker: int = marker) -> dict[str, Any]:
                return self.client.list_parts(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumberMarker=marker)

            r = self.retrier.call(f"list parts {key}", page)
            for p in r.get("Parts", []):
                out[p["PartNumber"]] = clean_etag(p["ETag"])
            if not r.get("IsTruncated"):
                return out
            marker = r["NextPartNumberMarker"]

    def abort(self, rec: FileRecord) -> None:
        if rec.upload_id:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=rec.key, UploadId=rec.upload_id)
            except ClientError as exc:  # best effort: a lifecycle rule reaps what is left
                log.warning("abort %s: %s", rec.key, exc)
