"""bench.robustness, container section: random damage to real small containers (issue 16).

Each case damages one of a few tiny real containers, opens it (from memory) and reads a fixed
set of windows. It must end in ContainerError or return exactly what the intact file returns.

Mutation kinds (the guarantee: ContainerError or the exact data):
  bitflip    1-8 random bit flips anywhere in the file
  truncate   cut to a random length, or random bytes appended
  overwrite  a random byte range (zeros, 0xff, random, or a copy of another range)
  footer     one field of the footer JSON replaced / deleted / duplicated / swapped / added,
             with the footer CRC and trailer recomputed, so the structural checks are hit
  hints      wrong, huge, negative or non-integer footer hints passed to open()
Counted apart (the guarantee there is ContainerError or *some* data: a payload rewritten with
recomputed CRCs can decode to other pixels or values, which no CRC-based format can detect):
  payload    one part's bytes flipped / swapped with another part's, CRCs and offsets recomputed,
             or replaced by a zstd bomb (40M rows in ~50 KB) or by a part whose length prefixes lie

"raw" = any exception outside RobodataError; "silent wrong" = no error but other data (payload
cases are not counted there). Cases run in forked worker processes; peak_rss_mb_max is the
largest max RSS of any worker (a worker's max RSS bounds that of every case it ran).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import resource
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.robustness_container_payload import bitflip, tamper_payload, with_footer
from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, Layout, StreamSpec, TopicGroup
from robodata.container.format import HEADER
from robodata.container.meta import VideoSettings
from robodata.errors import ContainerError, RobodataError

CASES = {"smoke": 40, "quick": 12_000, "full": 100_000}
KINDS = ("bitflip", "truncate", "overwrite", "footer", "hints", "payload")
WEIGHTS = (2, 1, 2, 4, 1, 1)
CASE_TIMEOUT_S = 20


class BytesSource:
    """A container in memory, read like a local file (a negative offset is an OSError, as pread)."""

    def __init__(self, data: bytes, name: str):
        self.data = data
        self.name = name

    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise OSError(22, f"invalid read {offset}+{length}")
        return self.data[offset : offset + length]


# ----------------------------------------------------------------- corpus
def write_fuzz(
    path: Path, cams: tuple[str, ...], h: int, w: int, bframes: int, seconds: float, codec: str = "h264"
) -> None:
    """A tiny container: cameras, a 7-wide float32 and a (2, 3) float64 array stream, events."""
    fps = 10.0
    streams = {c: StreamSpec(c, "video", fps, (h, w, 3)) for c in cams}
    streams["joint_pos"] = StreamSpec("joint_pos", "array", 50.0, (7,))
    streams["cmd"] = StreamSpec("cmd", "array", 20.0, (2, 3), dtype="float64")
    streams["events"] = StreamSpec("events", "events")
    meta = EpisodeMeta(path.stem, "robot-f", "site-f", "fuzz", 1_700_000_000_000_000_000, streams)
    layout = Layout(
        groups=(
            TopicGroup("cameras", cams, 0.5, VideoSettings(codec=codec, gop=5, crf=30, bframes=bframes)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 0.5),
            TopicGroup("events", ("events",), 60.0),
        )
    )
    rng = np.random.default_rng(len(cams))
    with EpisodeWriter(path, meta, layout) as wr:
        for i in range(int(seconds * fps)):
            for k, c in enumerate(cams):
                img = np.zeros((h, w, 3), np.uint8)
                img[:, : (i * 3 + k * 7) % w] = 200
                img[(i * 2) % h :, :, 1] = 90
                wr.write_frame(c, img, int(i * 1e8) + 500)
        tj = np.arange(int(seconds * 50)) * 20_000_000
        wr.write_array("joint_pos", tj, rng.standard_normal((len(tj), 7)).astype(np.float32))
        tc = np.arange(int(seconds * 20)) * 50_000_000 + 7
        wr.write_array("cmd", tc, rng.standard_normal((len(tc), 2, 3)))
        wr.write_events("events", np.array([3, 900_000_000, 1_400_000_000]), ["start", "grasp", "stop"], [{"a": 1}] * 3)


def _windows(cams: tuple[str, ...]) -> list[tuple[float, float, list[str] | None, int]]:
    inf = float("inf")
    return [
        (-inf, inf, None, 1),  # everything: every chunk is read
        (0.33, 0.81, None, 1),  # a middle window, chunks selected by time
        (0.5, 0.501, [cams[-1], "joint_pos"], 1),  # a 1 ms window
        (0.1, 1.6, [cams[0]], 2),  # subsampled video
    ]


def _read_all(reader: EpisodeReader, windows: list) -> list[dict[str, tuple[np.ndarray, np.ndarray]]]:
    out = []
    for t0, t1, streams, every in windows:
        win = reader.read_window(t0, t1, streams, every)
        out.append({s: (w.data, w.t) for s, w in win.items()})
    return out


def build_corpus(root: Path) -> list[dict[str, Any]]:
    """Tiny real containers with the data every window of them must return."""
    specs = [("one_cam", ("cam",), 24, 32, 0, 2.0), ("two_cams", ("left", "right"), 32, 48, 2, 1.5)]
    corpus = []
    for name, cams, h, w, bframes, seconds in specs:
        path = root / f"{name}.rdep"
        write_fuzz(path, cams, h, w, bframes, seconds)
        data = path.read_bytes()
        reader = EpisodeReader.open(BytesSource(data, name))
        windows = _windows(cams)
        off, length = reader.footer_offset, reader.footer_length
        doc = json.loads(data[off : off + length])
        corpus.append(
            {
                "name": name,
                "data": data,
                "doc": doc,
                "footer": (off, length),
                "windows": windows,
                "expected": _read_all(reader, windows),
            }
        )
    return corpus


# ----------------------------------------------------------------- mutations
def _junk(rng: random.Random, n: int) -> bytes:
    return rng.choice([bytes(n), b"\xff" * n, rng.randbytes(n)])


def truncate(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.2:
        return data + rng.randbytes(rng.randint(1, 64))
    return data[: rng.choice([rng.randrange(len(data)), rng.randrange(max(1, len(data) - 200), len(data))])]


def overwrite(data: bytes, rng: random.Random) -> bytes:
    n = rng.choice([1, 2, 4, 8, rng.randint(1, 256)])
    # half the time inside the header, the last 24 bytes or the footer's neighbourhood
    start = rng.choice([rng.randrange(len(data)), rng.randrange(HEADER.size), len(data) - rng.randint(1, 200)])
    n = min(n, len(data) - start)
    if rng.random() < 0.25:
        src = rng.randrange(len(data) - n + 1)
        fill = data[src : src + n]
    else:
        fill = _junk(rng, n)
    return data[:start] + fill + data[start + n :]


def _nodes(doc: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out.extend(_nodes(v, (*path, k)))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _new_value(rng: random.Random, old: Any, doc: Any) -> Any:
    if isinstance(old, int) and not isinstance(old, bool) and rng.random() < 0.6:
        return rng.choice([old + 1, old - 1, old * 2, -old, 0, -1, 1 << 63, (1 << 64) + 5, 10**30, old + 1_000_000])
    return rng.choice(
        [0, -1, 1.5, float("nan"), float("inf"), "", "x", "cam", "joint_pos", True, None, [], {}, [1, 2], {"a": 1}]
        + [json.loads(json.dumps(_get(doc, rng.choice(_nodes(doc)))))]  # a copy of a value from elsewhere
    )


def edit_footer(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    region = rng.choice(["meta", "layout", "codec_data", "chunks", "chunks", None])
    nodes = [p for p in _nodes(doc) if p and (region is None or p[0] == region)]
    path = rng.choice(nodes)
    parent, key = _get(doc, path[:-1]), path[-1]
    op = rng.choice(["replace", "replace", "replace", "delete", "duplicate", "swap", "add"])
    if op == "replace":
        parent[key] = _new_value(rng, parent[key], doc)
    elif op == "delete":
        del parent[key]
    elif op == "duplicate" and isinstance(parent, list):
        parent.insert(rng.randrange(len(parent) + 1), json.loads(json.dumps(parent[key])))
    elif op == "swap" and isinstance(parent, list) and len(parent) > 1:
        j = rng.randrange(len(parent))
        parent[key], parent[j] = parent[j], parent[key]
    elif isinstance(parent, dict):
        parent[rng.choice(["zz", "extra", "i", "parts"])] = _new_value(rng, None, doc)
    return doc


def rehint(orig: dict[str, Any], rng: random.Random) -> tuple[Any, Any]:
    off, length = orig["footer"]
    return rng.choice(
        [
            (off + rng.choice([-1, 1, -8, 100]), length),
            (off, length + rng.choice([-1, 1, 24])),
            (-off, length),
            (off, -length),
            (1 << 62, length),
            (off, 1 << 62),
            (10**30, 10**30),
            (float(off), length),
            ("16", str(length)),
            (0, 0),
            (off, length),
        ]
    )


def mutate(orig: dict[str, Any], kind: str, rng: random.Random) -> tuple[bytes, Any, Any]:
    """(bytes, footer_offset hint, footer_length hint) of one damaged copy of `orig`."""
    data, (off, _) = orig["data"], orig["footer"]
    if kind == "bitflip":
        return bitflip(data, rng), None, None
    if kind == "truncate":
        return truncate(data, rng), None, None
    if kind == "overwrite":
        return overwrite(data, rng), None, None
    if kind == "footer":
        return with_footer(data, off, edit_footer(orig["doc"], rng)), None, None
    if kind == "hints":
        return data if rng.random() < 0.8 else bitflip(data, rng), *rehint(orig, rng)
    return tamper_payload(orig, rng), None, None


# ----------------------------------------------------------------- cases
def same(a: dict[str, tuple[np.ndarray, np.ndarray]], b: dict[str, tuple[np.ndarray, np.ndarray]]) -> bool:
    if list(a) != list(b):
        return False
    for s in a:
        (da, ta), (db, tb) = a[s], b[s]
        if da.dtype != db.dtype or da.shape != db.shape or not np.array_equal(ta, tb):
            return False
        if not (list(da) == list(db) if da.dtype == object else np.array_equal(da, db)):
            return False
    return True


def run_case(orig: dict[str, Any], data: bytes, fo: Any, fl: Any) -> str:
    """'error' (ContainerError), 'exact', 'wrong', 'other: ...' (another RobodataError) or 'raw: ...'."""
    try:
        reader = EpisodeReader.open(BytesSource(data, orig["name"]), footer_offset=fo, footer_length=fl)
        got = _read_all(reader, orig["windows"])
    except ContainerError:
        return "error"
    except RobodataError as exc:
        return f"other: {type(exc).__name__}: {str(exc)[:200]}"
    except Exception as exc:  # noqa: BLE001 - what the bench counts
        return f"raw: {type(exc).__name__}: {str(exc)[:200]}"
    return "exact" if all(same(g, e) for g, e in zip(got, orig["expected"], strict=True)) else "wrong"


_CORPUS: list[dict[str, Any]] = []


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"case ran over {CASE_TIMEOUT_S} s")


def _worker(tasks: list[tuple[int, int, str]]) -> tuple[list[tuple[int, str, str]], float]:
    signal.signal(signal.SIGALRM, _alarm)
    out = []
    for seed, index, kind in tasks:
        rng = random.Random(seed)
        orig = _CORPUS[index]
        signal.alarm(CASE_TIMEOUT_S)
        try:
            result = run_case(orig, *mutate(orig, kind, rng))
        except TimeoutError as exc:
            result = f"raw: TimeoutError: {exc}"
        finally:
            signal.alarm(0)
        out.append((seed, kind, result))
    return out, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(size: str) -> dict[str, Any]:
    """Run the section; size is "smoke" | "quick" | "full"."""
    started = time.perf_counter()
    n = CASES[size]
    with tempfile.TemporaryDirectory() as tmp:
        _CORPUS[:] = build_corpus(Path(tmp))
    rng = random.Random(16)
    tasks = [(seed, seed % len(_CORPUS), rng.choices(KINDS, WEIGHTS)[0]) for seed in range(n)]
    procs = min(2, os.cpu_count() or 1)
    batches = [tasks[i : i + 200] for i in range(0, n, 200)]
    by_kind: dict[str, dict[str, int]] = {
        k: {"cases": 0, "errors": 0, "exact": 0, "other": 0, "raw": 0, "wrong": 0} for k in KINDS
    }
    samples: list[str] = []
    rss = 0.0
    with mp.get_context("fork").Pool(procs, maxtasksperchild=10) as pool:
        for results, worker_rss in pool.imap_unordered(_worker, batches):
            rss = max(rss, worker_rss)
            for seed, kind, result in results:
                k = by_kind[kind]
                k["cases"] += 1
                tag = result.split(":")[0]
                k[{"error": "errors", "exact": "exact", "wrong": "wrong", "other": "other"}.get(tag, "raw")] += 1
                violated = tag not in ("error", "exact") and not (tag == "wrong" and kind == "payload")
                if violated and len(samples) < 10:
                    samples.append(f"seed {seed} {kind}: {result}")
    guaranteed = [k for k in KINDS if k != "payload"]
    return {
        "cases": n,
        "raw_errors": sum(v["raw"] for v in by_kind.values()),
        "silent_wrong": sum(by_kind[k]["wrong"] for k in guaranteed),
        "other_errors": sum(v["other"] for v in by_kind.values()),  # RobodataError, not ContainerError
        "payload_changed_values": by_kind["payload"]["wrong"],  # new bytes behind new CRCs: not detectable
        "peak_rss_mb_max": round(rss, 1),
        "by_kind": by_kind,
        "failures": samples,  # the first cases that broke the guarantee (seed, kind, outcome)
        "seconds": round(time.perf_counter() - started, 1),
    }
