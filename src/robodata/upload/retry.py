"""Retries with exponential backoff and full jitter; which failures are worth retrying."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from botocore.exceptions import ClientError, HTTPClientError, IncompleteReadError
from botocore.exceptions import ConnectionError as BotoConnectionError

from robodata.errors import RobodataError
from robodata.upload.config import RetryConfig

T = TypeVar("T")

RETRYABLE_CODES = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "Throttling",
    "ThrottlingException",
    "RequestTimeTooSkewed",
    "BadDigest",
    "IncompleteBody",
}


class IntegrityError(RobodataError):
    """The server's answer does not match the local bytes (ETag, size or checksum)."""


class TransientError(RobodataError):
    """An S3 call kept failing after every retry; the episode stays local for the next pass."""


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, IntegrityError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        code = exc.response.get("Error", {}).get("Code", "")
        return status >= 500 or status == 429 or code in RETRYABLE_CODES
    # Network trouble only: missing credentials or a bad region must fail at once, not retry.
    return isinstance(exc, (HTTPClientError, BotoConnectionError, IncompleteReadError, ConnectionError, TimeoutError))


class Retrier:
    """Runs a call until it succeeds, a non-retryable error occurs, or attempts run out."""

    def __init__(
        self,
        cfg: RetryConfig,
        on_retry: Callable[[str, BaseException], None] | None = None,
        rng: random.Random | None = None,
    ):
        self.cfg = cfg
        self.on_retry = on_retry
        self.rng = rng or random.Random()

    def delay(self, attempt: int) -> float:
        return self.rng.uniform(0, min(self.cfg.max_delay_s, self.cfg.base_delay_s * 2**attempt))

    def call(self, what: str, fn: Callable[[], T]) -> T:
        for attempt in range(self.cfg.max_attempts):
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified below
                if not retryable(exc):
                    raise
                if attempt + 1 == self.cfg.max_attempts:
                    raise TransientError(f"{what}: gave up after {self.cfg.max_attempts} attempts: {exc}") from exc
                if self.on_retry:
                    self.on_retry(what, exc)
                time.sleep(self.delay(attempt))
        raise AssertionError("unreachable")
