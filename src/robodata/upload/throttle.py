"""Bandwidth cap: a token bucket charged as the HTTP layer reads each request body."""

from __future__ import annotations

import io
import threading
import time


class TokenBucket:
    """At most `rate` bytes/s on average, bursts up to `burst` bytes."""

    def __init__(self, rate: float, burst: float | None = None):
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(rate / 4, 64 * 1024))
        self.tokens = self.burst
        self.t = time.monotonic()
        self.lock = threading.Lock()

    def consume(self, n: int) -> None:
        while n > 0:
            take = min(n, self.burst)
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
                self.t = now
                if self.tokens >= take:
                    self.tokens -= take
                    n -= int(take)
                    continue
                wait = (take - self.tokens) / self.rate
            time.sleep(wait)


class ThrottledBody(io.BytesIO):
    """A request body whose reads wait for the bucket; seeks (botocore rewinds) are free.

    Payload signing is off (Content-MD5 protects the body), so the body is read once per
    attempt, by the socket writer, and the cap shapes the wire rate.
    """

    def __init__(self, data: bytes, bucket: TokenBucket | None):
        super().__init__(data)
        self.bucket = bucket

    def read(self, size: int | None = -1) -> bytes:
        buf = super().read(size)
        if self.bucket is not None and buf:
            self.bucket.consume(len(buf))
        return buf
