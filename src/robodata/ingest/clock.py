"""Clock models: map a device clock onto the host timeline (offset + drift), with the fit residual."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClockFit:
    drift: float  # host = drift * device + offset
    offset: float
    residual_ns: float  # RMS of the fit: alignment error of this stream
    samples: int = 0  # sync pairs the fit used (0: identity, no sync information)

    def apply(self, t: np.ndarray) -> np.ndarray:
        return np.round(self.drift * np.asarray(t, dtype=np.float64) + self.offset).astype(np.int64)

    def to_dict(self) -> dict:
        return {"drift": self.drift, "offset": self.offset, "residual_ns": self.residual_ns, "samples": self.samples}

    @classmethod
    def from_dict(cls, d: dict) -> ClockFit:
        return cls(float(d["drift"]), float(d["offset"]), float(d["residual_ns"]), int(d.get("samples", 0)))


IDENTITY = ClockFit(1.0, 0.0, 0.0, 0)


def fit_clock(pairs) -> ClockFit:
    """Least-squares line through [device_ns, host_ns] pairs (needs at least two)."""
    a = np.asarray(pairs, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2 or len(a) < 2:
        raise ValueError("clock sync needs at least two [device_ns, host_ns] pairs")
    if not np.isfinite(a).all():
        raise ValueError("clock sync pairs hold non-finite values")
    dev, host = a[:, 0], a[:, 1]
    d0 = dev.mean()
    if np.ptp(dev) == 0:
        raise ValueError("clock sync pairs all have the same device time")
    A = np.stack([dev - d0, np.ones_like(dev)], axis=1)
    (drift, b), *_ = np.linalg.lstsq(A, host, rcond=None)
    resid = host - (drift * (dev - d0) + b)
    return ClockFit(float(drift), float(b - drift * d0), float(np.sqrt(np.mean(resid**2))), len(a))


def fit_offset(device_ns: np.ndarray, host_ns: np.ndarray, max_pairs: int = 512) -> ClockFit:
    """Fit from per-message (header stamp, receive time) pairs, e.g. MCAP log_time vs header.stamp.

    Transport latency only ever adds delay, so the fit goes through the lower envelope:
    fit a line, then refit on the pairs at or below it (the least-delayed messages).
    """
    dev = np.asarray(device_ns, dtype=np.float64)
    host = np.asarray(host_ns, dtype=np.float64)
    if len(dev) < 2 or np.ptp(dev) == 0:
        return IDENTITY if len(dev) == 0 else ClockFit(1.0, float(np.median(host - dev)), 0.0, len(dev))
    idx = np.linspace(0, len(dev) - 1, min(len(dev), max_pairs)).astype(int)
    fit = fit_clock(np.stack([dev[idx], host[idx]], axis=1))
    low = idx[(host[idx] - fit.apply(dev[idx])) <= 0]
    if len(low) >= 2 and np.ptp(dev[low]) > 0:
        fit = fit_clock(np.stack([dev[low], host[low]], axis=1))
    resid = host[idx] - (fit.drift * dev[idx] + fit.offset)
    return ClockFit(fit.drift, fit.offset, float(np.sqrt(np.mean(resid**2))), len(idx))
