"""Derived per-episode data from a container (non-critical: failures never block ingestion).

segments: task phases from application events (task_start / grasp / release / task_end),
          falling back to gripper state changes, then to one whole-episode segment.
features: motion statistics of the proprio streams plus a cheap visual-activity measure
          from a few decoded frames of one camera.
"""

from __future__ import annotations

import itertools

import numpy as np

from robodata.container import EpisodeReader

PHASES = (("task_start", "approach"), ("grasp", "manipulate"), ("release", "retreat"))
END_EVENTS = ("task_success", "task_failure", "task_end")


def _events(r: EpisodeReader) -> list[tuple[float, str]]:
    if "events" not in r.meta.streams:
        return []
    w = r.read_window(0.0, r.meta.duration_s + 1.0, ["events"])["events"]
    return [
        (float(t), str(e if isinstance(e, str) else e[0] if isinstance(e, (tuple, list)) else e))
        for t, e in zip(w.t, w.data, strict=True)
    ]


def segments(r: EpisodeReader) -> list[tuple[str, float, float, str]]:
    """[(label, t_start_s, t_end_s, method)] covering the episode in order."""
    dur = float(r.meta.duration_s)
    evs = _events(r)
    marks = []
    for name, label in PHASES:
        t = next((t for t, e in evs if e == name), None)
        if t is not None:
            marks.append((t, label))
    if marks:
        end = next((t for t, e in evs if e in END_EVENTS), dur)
        marks.sort()
        out = []
        if marks[0][0] > 0:
            out.append(("idle", 0.0, marks[0][0], "events"))
        for (t0, lab), nxt in zip(marks, [m[0] for m in marks[1:]] + [end], strict=True):
            if nxt > t0:
                out.append((lab, t0, nxt, "events"))
        if end < dur:
            out.append(("idle", end, dur, "events"))
        return out
    if "joint_pos" in r.meta.streams:
        w = r.read_window(0.0, dur + 1.0, ["joint_pos"])["joint_pos"]
        if len(w.t) > 2:
            g = w.data[:, -1]
            closed = g < np.median(g)
            edges = np.flatnonzero(np.diff(closed.astype(np.int8))) + 1
            bounds = [0, *edges.tolist(), len(g) - 1]
            return [
                ("gripper_closed" if closed[a] else "gripper_open", float(w.t[a]), float(w.t[b]), "state")
                for a, b in itertools.pairwise(bounds)
                if b > a
            ]
    return [("episode", 0.0, dur, "whole")]


def features(r: EpisodeReader, visual_frames: int = 6) -> dict[str, float]:
    dur = float(r.meta.duration_s)
    out: dict[str, float] = {"duration_s": dur}
    if "joint_pos" in r.meta.streams:
        w = r.read_window(0.0, dur + 1.0, ["joint_pos"])["joint_pos"]
        q = w.data.astype(np.float64)
        if len(q) > 1:
            dq = np.diff(q, axis=0)
            dt = np.maximum(np.diff(w.t), 1e-6)[:, None]
            out["joint_path_length"] = float(np.abs(dq).sum())
            out["joint_speed_mean"] = float(np.abs(dq / dt).mean())
            out["joint_speed_p95"] = float(np.percentile(np.abs(dq / dt), 95))
            out["joint_range_max"] = float(np.ptp(q, axis=0).max())
    cams = [s for s, spec in r.meta.streams.items() if spec.kind == "video"]
    if cams and visual_frames > 1:
        cam = cams[0]
        times = np.linspace(0.0, max(dur - 1e-3, 0.0), visual_frames)
        frames = []
        for t in times:
            win = r.read_window(float(t), float(t) + 0.05, [cam])[cam]
            if len(win.data):
                frames.append(win.data[0].astype(np.float32))
        if len(frames) > 1:
            diffs = [np.abs(a - b).mean() for a, b in itertools.pairwise(frames)]
            out["visual_activity"] = float(np.mean(diffs))
            out["brightness_mean"] = float(np.mean([f.mean() for f in frames]))
    return out
