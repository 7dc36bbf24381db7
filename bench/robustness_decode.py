"""bench.robustness section "decode": small containers whose parts declare far more than they hold
(issue 44, item 7), each read for a 1 ms window in a fresh process.

Every case is a real tiny container (bench.robustness_container.build_corpus) with one part, or
several, replaced by a zstd bomb (bench.robustness_container_payload: valid zstd frames of zeros,
a few tens of KB per GB declared) whose index entry agrees with it: an array part at the old
decode cap (1.008 GB from ~30 KB: "the 23 KB case" of the issue), the same with its rows inside
the window or beside it, an events part, a video part, two streams at once, and bombs just under
what the expansion cap lets through. A case's peak is the reading process's peak RSS (VmHWM) over
its RSS after the open, so imports and the open are not counted.

`container_decode_peak_mb_per_input_kb` is the largest peak over input size of any case;
`old_cap_case_peak_mb` the peak of the array bomb at the old cap beside a 1 ms window (48 KB;
before: 2,061 MB, then a ContainerError), the nearest this bench has to the issue's 23 KB file
that took 2,870 MB (issue 44: <= 256 MB); `decode_peak_mb_max` the largest of any case.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.robustness_container import build_corpus
from bench.robustness_container_payload import events_bomb, packets_bomb, rebuild, zstd_bomb

OLD_CAP_ROWS = 28_000_000  # x 36 B = 1.008 GB: under the 1 GiB max_decode_bytes, what today's reader decoded
READ = r"""
import json, sys, time
from robodata.container import EpisodeReader
from robodata.errors import RobodataError

def hwm():
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024

r = EpisodeReader.open(sys.argv[1])
base, cpu = hwm(), time.process_time()
try:
    win = r.read_window(float(sys.argv[2]), float(sys.argv[2]) + 0.001, json.loads(sys.argv[3]))
    out = "read " + ", ".join(f"{k}: {v.data.shape}" for k, v in win.items())
except RobodataError as exc:
    out = f"{type(exc).__name__}: {str(exc)[:600]}"
except Exception as exc:
    out = f"raw: {type(exc).__name__}: {str(exc)[:600]}"
print(json.dumps({"base_mb": base, "peak_mb": hwm(), "cpu_s": time.process_time() - cpu, "outcome": out}))
"""


def _parts(doc: dict[str, Any], stream: str) -> list[tuple[int, int, list[Any]]]:
    return [(ci, pi, p) for ci, c in enumerate(doc["chunks"]) for pi, p in enumerate(c["parts"]) if p[0] == stream]


def build_cases(corpus: list[dict[str, Any]]) -> dict[str, tuple[bytes, float, list[str]]]:
    """name -> (container bytes, window start s, streams read)."""
    one = corpus[0]  # one camera "cam", joint_pos (7 float32), cmd (2x3 float64), events
    doc, data = one["doc"], one["data"]
    (ci, pi, p) = _parts(doc, "joint_pos")[1]  # the part of the chunk that holds t = 0.5 s
    (ce, pe, e) = _parts(doc, "events")[0]
    (cv, pv, v) = _parts(doc, "cam")[1]
    (cc, pc, c) = _parts(doc, "cmd")[1]

    def bomb(blobs: dict, entries: dict) -> bytes:
        return rebuild(data, doc, blobs, entries)

    def arrays(rows: int, t: int) -> bytes:
        return bomb({(ci, pi): zstd_bomb(rows, 7, "joint_pos")}, {(ci, pi): (t, t, rows)})

    under = 800_000  # x 36 B = 28.8 MB: just under the 32 MiB expansion floor
    return {
        "array_old_cap_beside_window": (arrays(OLD_CAP_ROWS, p[5]), 0.5, ["cam", "joint_pos"]),
        "array_old_cap_in_window": (arrays(OLD_CAP_ROWS, p[4]), 0.5, ["cam", "joint_pos"]),
        "array_under_floor_in_window": (arrays(under, p[4]), 0.5, ["joint_pos"]),
        "events_old_cap": (
            bomb({(ce, pe): events_bomb(60_000_000, "events")}, {(ce, pe): (e[4], e[4], 60_000_000)}),
            0.0,
            ["events"],
        ),
        "video_packets_old_cap": (
            bomb({(cv, pv): packets_bomb(1, "cam", 1_000_000_000)}, {(cv, pv): (v[4], v[4], 1)}),
            0.5,
            ["cam"],
        ),
        "two_streams_under_floor": (
            bomb(
                {(ci, pi): zstd_bomb(under // 2, 7, "joint_pos"), (cc, pc): zstd_bomb(under // 2, 6, "cmd")},
                {(ci, pi): (p[4], p[4], under // 2), (cc, pc): (c[4], c[4], under // 2)},
            ),
            0.5,
            ["joint_pos", "cmd"],
        ),
    }


def measure(path: Path, start: float, streams: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", READ, str(path), str(start), json.dumps(streams)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        outcome = f"raw: exit {out.returncode}: {out.stderr[-300:]}"
        return {"base_mb": 0.0, "peak_mb": 0.0, "cpu_s": 0.0, "outcome": outcome}
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(size: str) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(Path(tmp))
        built = build_cases(corpus)
        names = list(built) if size != "smoke" else ["array_old_cap_beside_window", "array_under_floor_in_window"]
        for name in names:
            data, start, streams = built[name]
            path = Path(tmp) / f"{name}.rdep"
            path.write_bytes(data)
            m = measure(path, start, streams)
            kb = len(data) / 1024
            cases[name] = {
                "input_kb": round(kb, 1),
                "decode_peak_mb": round(m["peak_mb"] - m["base_mb"], 1),
                "peak_rss_mb": round(m["peak_mb"], 1),
                "cpu_s": round(m["cpu_s"], 2),
                "outcome": m["outcome"],
            }
    per_kb = max(c["decode_peak_mb"] / c["input_kb"] for c in cases.values())
    return {
        "cases": len(cases),
        "raw_errors": sum(c["outcome"].startswith("raw") for c in cases.values()),
        "container_decode_peak_mb_per_input_kb": round(per_kb, 3),
        "old_cap_case_peak_mb": cases["array_old_cap_beside_window"]["decode_peak_mb"],
        "decode_peak_mb_max": max(c["decode_peak_mb"] for c in cases.values()),
        "by_case": cases,
    }
