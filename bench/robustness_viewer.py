"""bench.robustness section "viewer": damaged containers through `robodata view` (issue 43).

Each case damages one of a few tiny real containers (H.264 Annex B, H.264 with B-frames, which
the viewer re-encodes, H.264 re-muxed to avcC extradata and length-prefixed packets, HEVC, AV1)
and logs the whole episode to an in-memory Rerun recording, as `robodata view` does. It must end
in a RobodataError or log the episode; `raw_errors` counts any other exception, and
`extradata_logged_reader_refuses` extradata the viewer took where the reader refuses to read the
episode (the viewer validates extradata as the reader does: its first keyframe must decode).

Mutation kinds: the container section's (bitflip, truncate, overwrite, footer, payload; see
bench/robustness_container.py), and
  extradata  the camera's codec extradata replaced (random bytes, cut short, bits flipped, junk
             appended, another codec's, empty, a configuration record whose counts and lengths
             lie), footer CRC recomputed
  lengths    one length prefix of an avcC stream's packet rewritten (CRCs recomputed)
"""

from __future__ import annotations

import base64
import json
import random
import signal
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.common import peak_rss_mb
from bench.robustness_container import BytesSource, bitflip, mutate, with_footer, write_fuzz
from bench.robustness_container_payload import rebuild
from robodata.codecs.arrays import encode_packets
from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.viz.paramsets import annexb_nals

CASES = {"smoke": 30, "quick": 600, "full": 5000}
KINDS = ("bitflip", "truncate", "overwrite", "footer", "payload", "extradata", "lengths")
WEIGHTS = (2, 1, 1, 2, 1, 4, 1)
CASE_TIMEOUT_S = 20


def _item(name: str, data: bytes) -> dict[str, Any]:
    r = EpisodeReader.open(BytesSource(data, name))
    off, length = r.footer_offset, r.footer_length
    return {"name": name, "data": data, "doc": json.loads(data[off : off + length]), "footer": (off, length)}


def video_parts(item: dict[str, Any]) -> list[tuple[int, int, str, pa.Table]]:
    """(chunk index, part index, stream, packet table) of every video part."""
    r = EpisodeReader.open(BytesSource(item["data"], item["name"]))
    cams = {s: (-(1 << 62), 1 << 62) for s, spec in r.meta.streams.items() if spec.kind == "video"}
    return [(c.index, c.parts.index(p), p.stream, r.part_table(c, p, blob)) for c, p, blob in r.fetch_parts(cams)]


def packet_part(table: pa.Table, data: list[bytes], stream: str) -> bytes:
    cols = {k: table.column(k).to_pylist() for k in ("pts", "dts", "key", "t_ns", "ref")}
    return encode_packets(cols["pts"], cols["dts"], cols["key"], cols["t_ns"], data, cols["ref"], stream)


def _avcc_record(extradata: bytes) -> bytes:
    nals = annexb_nals(extradata, "h264", "extradata")
    sps = [n for n in nals if n[0] & 0x1F == 7]
    pps = [n for n in nals if n[0] & 0x1F == 8]
    out = bytearray([1, sps[0][1], sps[0][2], sps[0][3], 0xFF, 0xE0 | len(sps)])
    for n in sps:
        out += len(n).to_bytes(2, "big") + n
    out.append(len(pps))
    for n in pps:
        out += len(n).to_bytes(2, "big") + n
    return bytes(out)


def to_avcc(item: dict[str, Any]) -> dict[str, Any]:
    """The item with its H.264 cameras as avcC extradata and 4-byte length-prefixed packets."""
    blobs = {}
    for ci, pi, stream, table in video_parts(item):
        data = [
            b"".join(len(n).to_bytes(4, "big") + n for n in annexb_nals(b, "h264", "packet"))
            for b in table.column("data").to_pylist()
        ]
        blobs[(ci, pi)] = packet_part(table, data, stream)
    codec_data = {s: _avcc_record(base64.b64decode(v)) for s, v in item["doc"]["codec_data"].items()}
    doc = {**item["doc"], "codec_data": {s: base64.b64encode(v).decode() for s, v in codec_data.items()}}
    return _item(item["name"] + "_avcc", rebuild(item["data"], doc, blobs))


def build_corpus(root: Path) -> list[dict[str, Any]]:
    specs = [
        ("h264", ("cam",), 24, 32, 0, "h264"),
        ("h264_bframes", ("left", "right"), 32, 48, 2, "h264"),
        ("hevc", ("cam",), 32, 32, 0, "hevc"),
        ("av1", ("cam",), 32, 32, 0, "av1"),
    ]
    corpus = []
    for name, cams, h, w, bframes, codec in specs:
        path = root / f"{name}.rdep"
        write_fuzz(path, cams, h, w, bframes, 1.5, codec)
        corpus.append(_item(name, path.read_bytes()))
    corpus.append(to_avcc(corpus[0]))
    return corpus


# ----------------------------------------------------------------- mutations
def _record(rng: random.Random) -> bytes:
    """A configuration record whose counts and lengths lie (avcC, hvcC or av1C shaped)."""
    kind = rng.randrange(3)
    if kind == 0:
        head = bytes([1, 0x64, 0, 0x1F, 0xFC | rng.randrange(4), 0xE0 | rng.randrange(32)])
    elif kind == 1:
        head = bytes([1]) + rng.randbytes(20) + bytes([0xF0 | rng.randrange(4), rng.randrange(256)])
    else:
        head = bytes([0x81, rng.randrange(256), rng.randrange(256), 0])
    return head + rng.randbytes(rng.randint(0, 24)) + struct.pack(">H", rng.choice([0, 1, 0xFFFF, 300]))


def new_extradata(old: bytes, others: list[bytes], rng: random.Random) -> bytes:
    how = rng.randrange(7)
    if how == 0:
        return rng.randbytes(rng.randint(1, 80))
    if how == 1:
        return old[: rng.randrange(len(old))] if old else b""
    if how == 2:
        return bitflip(old, rng) if old else b"\x01"
    if how == 3:
        return old + rng.randbytes(rng.randint(1, 32))
    if how == 4:
        return rng.choice(others)
    if how == 5:
        return b""
    return _record(rng)


def mutate_extradata(item: dict[str, Any], others: list[bytes], rng: random.Random) -> bytes:
    doc = {**item["doc"], "codec_data": dict(item["doc"]["codec_data"])}
    cam = rng.choice(sorted(doc["codec_data"]))
    old = base64.b64decode(doc["codec_data"][cam])
    doc["codec_data"][cam] = base64.b64encode(new_extradata(old, others, rng)).decode()
    return with_footer(item["data"], item["footer"][0], doc)


def mutate_lengths(item: dict[str, Any], rng: random.Random) -> bytes:
    """One packet's length prefix rewritten (an avcC item's video part), CRCs recomputed."""
    ci, pi, stream, table = rng.choice(video_parts(item))
    data = table.column("data").to_pylist()
    k = rng.randrange(len(data))
    pkt = bytearray(data[k])
    struct.pack_into(">I", pkt, 0, rng.choice([0, 1, len(pkt), len(pkt) + 1, 1 << 31, rng.randrange(1 << 32)]))
    data[k] = bytes(pkt) if rng.random() < 0.8 else bytes(pkt[: rng.randrange(1, 4)])
    return rebuild(item["data"], item["doc"], {(ci, pi): packet_part(table, data, stream)})


# ----------------------------------------------------------------- cases
def view_case(data: bytes, name: str) -> str:
    """'error' (a RobodataError), 'logged', or 'raw: ...'."""
    import rerun as rr

    from robodata.viz.record import log_episode

    try:
        reader = EpisodeReader.open(BytesSource(data, name))
        rec = rr.RecordingStream("robodata-fuzz", recording_id=name)
        sink = rec.memory_recording()
        log_episode(reader, rec)
        rec.flush()
        sink.drain_as_bytes()
    except RobodataError:
        return "error"
    except Exception as exc:  # noqa: BLE001 - what the bench counts
        return f"raw: {type(exc).__name__}: {str(exc)[:200]}"
    return "logged"


def reader_refuses(data: bytes, name: str) -> bool:
    """Whether the container reader refuses to read the whole episode."""
    try:
        EpisodeReader.open(BytesSource(data, name)).read_window(-float("inf"), float("inf"))
    except RobodataError:
        return True
    return False


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"case ran over {CASE_TIMEOUT_S} s")


def run(size: str) -> dict[str, Any]:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(Path(tmp))
    extradata = [base64.b64decode(v) for item in corpus for v in item["doc"]["codec_data"].values()]
    avcc = next(i for i in corpus if i["name"].endswith("_avcc"))
    rng = random.Random(43)
    by_kind = {k: {"cases": 0, "errors": 0, "logged": 0, "raw": 0} for k in KINDS}
    failures: list[str] = []
    disagree = 0  # extradata cases the viewer logged and the reader refuses
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for seed in range(CASES[size]):
            kind = rng.choices(KINDS, WEIGHTS)[0]
            item = corpus[seed % len(corpus)]
            crng = random.Random(seed)
            if kind == "extradata":
                data = mutate_extradata(item, extradata, crng)
            elif kind == "lengths":
                item = avcc
                data = mutate_lengths(avcc, crng)
            else:
                data = mutate(item, kind, crng)[0]
            signal.alarm(CASE_TIMEOUT_S)
            try:
                result = view_case(data, item["name"])
            except TimeoutError as exc:
                result = f"raw: TimeoutError: {exc}"
            finally:
                signal.alarm(0)
            tag = result.split(":")[0]
            if kind == "extradata" and tag == "logged" and reader_refuses(data, item["name"]):
                disagree += 1
                if len(failures) < 10:
                    failures.append(f"seed {seed} extradata {item['name']}: logged, the reader refuses it")
            by_kind[kind]["cases"] += 1
            by_kind[kind][{"error": "errors", "logged": "logged"}.get(tag, "raw")] += 1
            if tag == "raw" and len(failures) < 10:
                failures.append(f"seed {seed} {kind} {item['name']}: {result}")
    finally:
        signal.signal(signal.SIGALRM, previous)
    return {
        "cases": CASES[size],
        "raw_errors": sum(v["raw"] for v in by_kind.values()),
        "extradata_logged_reader_refuses": disagree,
        "by_kind": by_kind,
        "corpus": [i["name"] for i in corpus],
        "failures": failures,
        "peak_rss_mb": peak_rss_mb(),
        "seconds": round(time.perf_counter() - started, 1),
    }
