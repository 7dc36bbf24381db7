"""Upstream verification: re-read what the server stored and compare it with the local digest.

HEAD must report the local size, the ETag recomputed locally from the part MD5s (the server
derives it from the bytes it stored) and the sha256 we attached as metadata; in ``download``
mode the object is also streamed back and its sha256 recomputed.
"""

from __future__ import annotations

import hashlib
from typing import Any

from botocore.exceptions import ClientError

from robodata.upload.digest import READ_CHUNK, clean_etag
from robodata.upload.journal import Journal
from robodata.upload.retry import IntegrityError, Retrier, TransientError


class UpstreamMissing(TransientError):
    """The object is not upstream (never written, or deleted since); it is uploaded again."""


class UpstreamMismatch(TransientError):
    """Upstream kept answering with other bytes than the local ones (after every retry)."""


def no_such(exc: ClientError, *codes: str) -> bool:
    err = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return err.get("Code") in codes or (status == 404 and "404" in codes)


def matches(head: dict, size: int, etag: str, sha256: str) -> bool:
    return (
        head.get("ContentLength") == size
        and clean_etag(head.get("ETag")) == etag
        and head.get("Metadata", {}).get("sha256") == sha256
    )


class Verifier:
    def __init__(self, client: Any, bucket: str, retrier: Retrier, journal: Journal, mode: str):
        self.client, self.bucket, self.retrier, self.journal, self.mode = client, bucket, retrier, journal, mode

    def head(self, key: str) -> dict | None:
        """HEAD with retries; None when the object does not exist."""

        def go() -> dict | None:
            try:
                return self.client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if no_such(exc, "404", "NoSuchKey", "NotFound"):
                    return None
                raise

        return self.retrier.call(f"head {key}", go)

    def verify(self, key: str, size: int, etag: str, sha256: str) -> None:
        """Re-read the object as it is now; raise unless it matches the local digest.

        Raises UpstreamMissing (404) or UpstreamMismatch (a mismatch that outlived the retries);
        both send the object back to 'hashed', to be uploaded again. Other failures: TransientError.
        """

        def go() -> None:
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if no_such(exc, "404", "NoSuchKey", "NotFound"):
                    raise UpstreamMissing(f"verify {key}: no such object upstream") from exc
                raise
            if not matches(head, size, etag, sha256):
                raise IntegrityError(
                    f"verify {key}: server has size={head.get('ContentLength')} "
                    f"etag={head.get('ETag')} sha256={head.get('Metadata', {}).get('sha256')}, "
                    f"expected size={size} etag={etag} sha256={sha256}"
                )
            if self.mode == "download":
                self._download(key, sha256)

        try:
            self.retrier.call(f"verify {key}", go)
        except UpstreamMissing:
            self.journal.set_file_state(key, "hashed", counters={"verify_failures": 1})
            raise
        except TransientError as exc:
            if isinstance(exc.__cause__, IntegrityError):  # stored bytes look wrong: upload again
                self.journal.set_file_state(key, "hashed", counters={"verify_failures": 1})
                raise UpstreamMismatch(str(exc)) from exc.__cause__
            raise

    def _download(self, key: str, sha256: str) -> None:
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        h = hashlib.sha256()
        for chunk in iter(lambda: body.read(READ_CHUNK), b""):
            h.update(chunk)
        if h.hexdigest() != sha256:
            raise IntegrityError(f"verify {key}: downloaded sha256 {h.hexdigest()} != local {sha256}")
