"""QC checks: pure functions over the facts a stage recorded, selected per vendor / source.

Pre-conversion checks judge an episode's alignment (robodata.ingest.align); post-conversion
checks judge the written container. Each returns (passed, reason). Which checks run for an
episode, and which of them quarantine it when they fail (blocking), is configuration.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from robodata.config import require
from robodata.ingest.rates import DEFAULT_RATE_TOLERANCE, declared_ok

if TYPE_CHECKING:  # the check names and selection load without the alignment code (and PyAV)
    from robodata.ingest.align import AlignedTracks


@dataclass(frozen=True)
class QCThresholds:
    rate_tolerance: float = DEFAULT_RATE_TOLERANCE  # |measured / nominal - 1|
    max_gap_periods: float = 4.0  # largest sample gap, in nominal periods
    joint_abs_max: float = 2 * math.pi  # |joint_pos| limit
    max_clock_error_ms: float = 5.0  # clock-fit residual
    min_duration_s: float = 0.5
    duration_tolerance_s: float = 0.5  # container duration vs aligned span

    def __post_init__(self) -> None:
        require(
            self.rate_tolerance > 0 and self.max_gap_periods > 1,
            "QC thresholds: rate_tolerance > 0, max_gap_periods > 1",
        )
        require(self.joint_abs_max > 0 and self.max_clock_error_ms > 0, "QC thresholds must be > 0")


@dataclass
class Outcome:
    check: str
    passed: bool
    reason: str = ""


PreCheck = Callable[["AlignedTracks", QCThresholds], tuple[bool, str]]


def _readable(al, th):  # evaluated specially (no alignment when unreadable); here for completeness
    return True, ""


# Identity checks fail while reading (robodata.ingest.steps.aligned_tracks: `failed_check`), so
# like `readable` they are evaluated specially; they always block: such an episode is never converted.
# `recognized` fails for a landing entry no importer claims (robodata.ingest.landing.kinds).
IDENTITY_CHECKS = ("recognized", "names_safe", "episode_id_unique")


def _topics_known(al: AlignedTracks, th: QCThresholds):
    unknown = [i for i in al.issues if i.startswith("unknown_topic:")]
    return (not unknown, "; ".join(unknown[:5]) + (f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""))


def _monotonic(al: AlignedTracks, th: QCThresholds):
    bad = {s: t.nonmonotonic for s, t in al.timing.items() if t.nonmonotonic and t.kind != "events"}
    return (not bad, ", ".join(f"{s}: {n} non-increasing timestamps" for s, n in bad.items()))


def _rate(al: AlignedTracks, th: QCThresholds):
    """The declared rate is a rate and the timestamps agree with it (robodata.ingest.align.declared_ok);
    a stream with fewer than 3 samples has no measured rate and is only checked for a declared one."""
    bad = []
    for s, t in al.timing.items():
        if t.kind == "events":
            continue
        measured = t.measured_hz if t.count >= 3 else 0.0
        if not declared_ok(t.nominal_hz, measured, th.rate_tolerance):
            bad.append(f"{s}: {t.measured_hz:.2f} Hz measured (its timestamps) vs declared {t.nominal_hz:g} Hz")
    return (not bad, "; ".join(bad))


def _jump(s: str, t) -> str:
    """One stream's clock jumps, from its own timestamps (robodata.ingest.align._largest_jump)."""
    if t.jump_at >= 0:
        way = "back" if t.jump_back else "forward"
        return f"{s}: {t.jumps} clock jump(s), largest {t.jump_s:.3f} s {way} at sample {t.jump_at} of {t.count}"
    return (
        f"{s}: {t.jumps} clock jump(s): its clock fit drifts {t.clock_drift_ppm:+.0f} ppm, a fit across a "
        "discontinuity (no single interval of its timestamps shows it)"
    )


def _continuous(al: AlignedTracks, th: QCThresholds):
    bad = [_jump(s, t) for s, t in al.timing.items() if t.jumps]
    return (not bad, "; ".join(bad))


def _gaps(al: AlignedTracks, th: QCThresholds):
    bad = []
    for s, t in al.timing.items():
        if t.kind == "events" or t.nominal_hz <= 0:
            continue
        limit = th.max_gap_periods / t.nominal_hz
        if t.max_gap_s > limit:
            bad.append(
                f"{s}: gap of {t.max_gap_s * 1e3:.0f} ms > {limit * 1e3:.0f} ms ({th.max_gap_periods:g} periods)"
            )
    return (not bad, "; ".join(bad))


RADIANS = ("rad", "radian", "radians")  # the units joints_in_range's bound (+-joint_abs_max) is in


def _joints(al: AlignedTracks, th: QCThresholds):
    """Joint positions are finite and, where the source declares them in radians, within
    +-joint_abs_max. A joint stream of undeclared units (SO-100's +-100 range, pixel-space state) is
    not range-checked: `units_declared` records that instead, without blocking."""
    bad = []
    for s, t in al.timing.items():
        radians = t.kind == "array" and t.units.lower() in RADIANS
        if t.kind != "array" or not (s.startswith("joint_pos") or radians):
            continue
        if t.nonfinite:
            bad.append(f"{s}: {t.nonfinite} non-finite values")
        elif radians and t.vmin is not None and max(abs(t.vmin), abs(t.vmax or 0)) > th.joint_abs_max:
            bad.append(f"{s}: range [{t.vmin:.3f}, {t.vmax:.3f}] rad exceeds +-{th.joint_abs_max:.3f}")
    return (not bad, "; ".join(bad))


def _units(al: AlignedTracks, th: QCThresholds):
    bad = [
        f"{s}: units not declared, range [{t.vmin:.3f}, {t.vmax:.3f}] not checked (declare them: a key map's "
        "or topic rule's `units`, LeRobot names ending in _rad)"
        for s, t in al.timing.items()
        if t.kind == "array" and s.startswith("joint_pos") and not t.units and t.vmin is not None
    ]
    return (not bad, "; ".join(bad))


def _findings(prefix: str) -> PreCheck:
    """A check failing on the episode's read-time findings (`RawEpisode.issues`) of one kind."""

    def check(al: AlignedTracks, th: QCThresholds):
        found = [i[len(prefix) :].strip() for i in al.issues if i.startswith(prefix)]
        return (not found, "; ".join(found[:5]) + (f" (+{len(found) - 5} more)" if len(found) > 5 else ""))

    return check


def _clock(al: AlignedTracks, th: QCThresholds):
    bad = [
        f"{s}: clock-fit residual {t.clock_error_ms:.2f} ms"
        for s, t in al.timing.items()
        if t.clock_error_ms > th.max_clock_error_ms
    ]
    return (not bad, "; ".join(bad) + (f" > {th.max_clock_error_ms} ms" if bad else ""))


def _duration(al: AlignedTracks, th: QCThresholds):
    span = max((t.last_s for t in al.timing.values()), default=0.0)
    return (
        span >= th.min_duration_s,
        f"episode spans {span:.2f} s < {th.min_duration_s} s" if span < th.min_duration_s else "",
    )


PRE_CHECKS: dict[str, PreCheck] = {
    "readable": _readable,
    "recognized": _readable,
    "names_safe": _readable,
    "episode_id_unique": _readable,
    "topics_known": _topics_known,
    "timestamps_monotonic": _monotonic,
    "rate_within_tolerance": _rate,
    "no_frame_gaps": _gaps,
    "clock_continuous": _continuous,
    "joints_in_range": _joints,
    "units_declared": _units,
    "clock_aligned": _clock,
    "min_duration": _duration,
    # read-time findings (non-blocking by default): the episode is as the source holds it, with a caveat
    "frames_match_state": _findings("frames_state_mismatch:"),  # LeRobot: frames vs parquet rows
    "episode_framed": _findings("is_last_unset:"),  # RLDS: framed by is_first and the record's end
    "rate_declared": _findings("rate_unknown:"),  # step formats: no source gives the control rate
}
# the QCThresholds fields each check reads (a QC file sets them per check)
THRESHOLDS = {
    "rate_within_tolerance": ("rate_tolerance",),
    "no_frame_gaps": ("max_gap_periods",),
    "joints_in_range": ("joint_abs_max",),
    "clock_aligned": ("max_clock_error_ms",),
    "min_duration": ("min_duration_s",),
    "duration_consistent": ("duration_tolerance_s",),
}
POST_CHECKS = ("converted", "video_decodable", "duration_consistent")
ALL_CHECKS = (*PRE_CHECKS, *POST_CHECKS)
DEFAULT_BLOCKING = (
    "readable",
    "timestamps_monotonic",
    "joints_in_range",
    "rate_within_tolerance",  # a wrong rate is a wrong fact on the row (issue 24)
    "clock_continuous",  # a clock jump makes the duration and every sample time wrong
    "converted",
    "video_decodable",
)


@dataclass(frozen=True)
class QCSelection:
    """Which checks run per vendor / source (first match: vendor, then source, then `checks`)."""

    checks: tuple[str, ...] = ALL_CHECKS
    by_vendor: dict[str, tuple[str, ...]] = field(default_factory=dict)
    by_source: dict[str, tuple[str, ...]] = field(default_factory=dict)
    blocking: tuple[str, ...] = DEFAULT_BLOCKING
    thresholds: QCThresholds = field(default_factory=QCThresholds)

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "blocking", tuple(self.blocking))
        for where, names in [
            ("checks", self.checks),
            ("blocking", self.blocking),
            *[(f"by_vendor.{k}", v) for k, v in self.by_vendor.items()],
            *[(f"by_source.{k}", v) for k, v in self.by_source.items()],
        ]:
            unknown = sorted(set(names) - set(ALL_CHECKS))
            require(not unknown, f"QC selection {where}: unknown check(s) {unknown}; known: {list(ALL_CHECKS)}")

    def checks_for(self, vendor: str, source: str) -> tuple[str, ...]:
        chosen = self.by_vendor.get(vendor)
        if chosen is None:
            chosen = next((v for k, v in self.by_source.items() if source.startswith(k)), None)
        names = tuple(chosen if chosen is not None else self.checks)
        # readable / converted always run: without them nothing else can be judged.
        return tuple(dict.fromkeys(("readable", *names, "converted")))


def evaluate_pre(
    al: AlignedTracks | None, error: str, names: tuple[str, ...], th: QCThresholds, failed_check: str = ""
) -> list[Outcome]:
    """No alignment: one failed outcome, for `failed_check` (readable unless an identity check)."""
    if al is None:
        return [Outcome(failed_check or "readable", False, error or "unreadable")]
    out = [Outcome("readable", True)]
    for n in names:
        if n in PRE_CHECKS and n not in ("readable", *IDENTITY_CHECKS):
            ok, why = PRE_CHECKS[n](al, th)
            out.append(Outcome(n, bool(ok), "" if ok else why))
    return out
