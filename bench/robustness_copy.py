"""bench.robustness copy section (issue 40): sources whose video packets lie, offered for a stream copy.

A LeRobot v2.1 episode (H.264 GOP 2 with B-frames, and AV1 GOP 2) and an MCAP episode whose camera is
foxglove.CompressedVideo H.264 (Annex B, GOP 2; also with its parameter sets stripped) are converted with --video copy
while its camera's demuxed packets are altered the way a hostile file presents them: keyframe flags
flipped either way, pts swapped / repeated / dropped, a packet cut short, a packet's bytes replaced
with garbage of the same length, extradata removed, the episode opening after its keyframe, packets
from another file spliced in. Each case must end as a transcode with a reason (or the episode
refused with a RobodataError); `stored_broken` counts containers that hold a copied stream whose
frames differ from PyAV's decode of the original packets, `raw_errors` exceptions outside
RobodataError. `copied_intact`: unaltered controls that were copied (they must be). Conversions run
with VideoCopyConfig's defaults (one GOP decoded per camera; every GOP of an Annex B camera); the Annex
B input also gets packets whose NAL unit / slice headers lie (forbidden bit, two pictures in one
packet), which the header checks of every packet must catch (robodata.codecs.nal_check). An Annex B
packet cut short inside its slice data has sound headers: only a decode of its GOP sees it, which the
default's decode of every GOP does, except where what is left still decodes without an error (a P
slice of a few bytes: no decoder tells that from a recording; counted in stored_broken, named in
`unclear`). `annexb_decode_sample` reruns the Annex B cases with annexb_decode="sample" (a sample of
GOPs decoded, every packet's headers read): there such a packet is stored as recorded unless its GOP
is sampled.

    python -c "from bench.robustness_copy import run; print(run('quick'))"
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import BENCH_DIR
from bench.ingest_copy import source_frames


def _lies(src, rng: random.Random) -> dict[str, Any]:
    """name -> altered SourceVideo."""
    pk = src.packets
    n = len(pk)
    keys = [i for i, p in enumerate(pk) if p.key]
    non = [i for i, p in enumerate(pk) if not p.key]

    def alter(i: int, **kw) -> list:
        return [dataclasses.replace(p, **kw) if j == i else p for j, p in enumerate(pk)]

    def swap(i: int, j: int) -> list:
        out = list(pk)
        out[i], out[j] = dataclasses.replace(pk[i], pts=pk[j].pts), dataclasses.replace(pk[j], pts=pk[i].pts)
        return out

    k, m = rng.choice(keys[1:]), rng.choice(non)
    garbage = bytes(rng.getrandbits(8) for _ in range(len(pk[m].data)))
    return {
        "key_flag_cleared": dataclasses.replace(src, packets=alter(k, key=False)),
        "key_flag_set": dataclasses.replace(src, packets=alter(m, key=True)),
        "pts_swapped_in_gop": dataclasses.replace(src, packets=swap(k, k + 1)),
        "pts_swapped_far": dataclasses.replace(src, packets=swap(1, n - 2)),
        "pts_repeated": dataclasses.replace(src, packets=alter(m, pts=pk[m - 1].pts)),
        "pts_missing": dataclasses.replace(src, packets=alter(m, pts=None)),
        "packet_truncated": dataclasses.replace(src, packets=alter(m, data=pk[m].data[: len(pk[m].data) // 3])),
        "packet_garbage": dataclasses.replace(src, packets=alter(m, data=garbage)),
        "packet_empty": dataclasses.replace(src, packets=alter(m, data=b"")),
        "extradata_missing": dataclasses.replace(src, extradata=b""),
        "extradata_garbage": dataclasses.replace(src, extradata=bytes(rng.getrandbits(8) for _ in range(24))),
        "opens_after_keyframe": dataclasses.replace(src, packets=pk[1:]),
        "packet_dropped": dataclasses.replace(src, packets=pk[:m] + pk[m + 1 :]),
        "codec_mislabelled": dataclasses.replace(src, codec="hevc" if src.codec != "hevc" else "h264"),
    }


def _source(work: Path, codec: str, bframes: int) -> tuple[str, str]:
    """(uri, kind) of a 24-frame 64x64 episode: LeRobot v2.1 mp4, or MCAP foxglove.CompressedVideo."""
    from robodata.ingest.synth.episode import SynthConfig, make_episode
    from robodata.ingest.synth.lerobot import write_lerobot
    from robodata.ingest.synth.mcap import write_mcap_episode
    from robodata.ingest.synth.mcap_video import CompressedVideoSpec

    if codec == "mcap_h264":
        cfg = SynthConfig(episodes=1, duration_s=2.4, cameras=("top",), height=64, width=64, fps=10.0, format="mcap")
        (work / codec).mkdir(exist_ok=True)
        return str(write_mcap_episode(make_episode(cfg, 0), work / codec, video=CompressedVideoSpec(gop=2))), "mcap"
    root = write_lerobot(
        work / f"{codec}", episodes=1, frames_per_episode=24, fps=10, height=64, width=64, codec=codec,
        cameras=("top",), gop=4 if bframes > 0 else 2, bframes=bframes,
    )  # fmt: skip
    return f"{root}#0", "lerobot-v2.1"


def _stored_broken(convert, raw, al, out: Path, cfg, truth: list[np.ndarray]) -> bool:
    """Whether `cfg`'s conversion stores a copy whose frames differ from `truth` (the source's decode)."""
    from robodata.container import EpisodeReader
    from robodata.errors import RobodataError

    try:
        res = convert(raw, al, out, copy=cfg)
    except RobodataError:
        return False
    if res.video["top"]["mode"] != "copy":
        return False
    got = EpisodeReader.open(out).read_window(-1.0, float("inf"), ["top"])["top"].data
    return len(got) != len(truth) or not all(np.array_equal(a, b) for a, b in zip(got, truth, strict=True))


def _no_params(unit: bytes) -> bytes:
    """An Annex B access unit without its SPS / PPS NAL units."""
    nals = [n for n in unit.split(b"\x00\x00\x01") if n.rstrip(b"\x00")]
    return b"".join(b"\x00\x00\x01" + n for n in nals if n[0] & 0x1F not in (7, 8))


def _header_lies(src, rng: random.Random) -> dict[str, Any]:
    """Annex B packets whose headers lie: a slice's forbidden_zero_bit set, a second picture in a packet."""
    pk = src.packets
    m = rng.choice([i for i, p in enumerate(pk) if not p.key and i + 2 < len(pk)])

    def alter(data: bytes) -> Any:
        packets = [dataclasses.replace(p, data=data) if j == m else p for j, p in enumerate(pk)]
        return dataclasses.replace(src, packets=packets)

    s = pk[m].data.find(b"\x00\x00\x01") + 3
    return {
        "nal_forbidden_bit": alter(pk[m].data[:s] + bytes([pk[m].data[s] | 0x80]) + pk[m].data[s + 1 :]),
        "two_pictures_in_a_packet": alter(pk[m].data + pk[m + 2].data),
    }


def run(size: str) -> dict[str, Any]:
    from robodata.container import EpisodeReader
    from robodata.errors import RobodataError
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert
    from robodata.ingest.importers import open_raw
    from robodata.ingest.video_copy import VideoCopyConfig

    rounds = {"smoke": 1, "quick": 3}.get(size, 6)
    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="robust-copy-", dir=BENCH_DIR))
    cases = stored_broken = raw_errors = transcoded = refused = controls = copied_intact = 0
    unclear: list[str] = []
    outcome: dict[str, str] = {}  # first round: what became of each case
    # (input, B-frames, annexb_decode): None the default; the option is counted apart
    runs = [("h264", 1, None), ("av1", -1, None), ("mcap_h264", 0, None), ("mcap_h264", 0, "sample")]
    opt_broken: list[str] = []
    opt_cases = 0
    for codec, bframes, annexb in runs:
        rng = random.Random(f"40/{codec}")  # the same lies for an input's two runs
        raw = open_raw(*_source(work, codec, bframes))
        al = aligned_tracks(raw)
        assert raw.video_sources is not None, "a LeRobot video camera keeps its bitstream"
        good = raw.video_sources("top")
        truth = source_frames(good)
        for r in range(rounds):
            variants = {"control": good, **_lies(good, rng)}
            if codec == "mcap_h264":  # Annex B: parameter sets in band, none kept aside
                variants["parameter_sets_missing"] = dataclasses.replace(
                    good, extradata=b"", packets=[dataclasses.replace(p, data=_no_params(p.data)) for p in good.packets]
                )
                variants.update(_header_lies(good, rng))
            for name, src in variants.items():
                raw.video_sources = lambda cam, s=src: s  # what a hostile file's demuxer hands over
                out = work / f"{codec}-{name}-{r}.rdep"
                cfg = (
                    VideoCopyConfig(mode="copy")
                    if annexb is None
                    else VideoCopyConfig(mode="copy", annexb_decode=annexb)
                )
                if annexb is not None:  # the sampled option, counted apart from the defaults' figures
                    opt_cases += name != "control"
                    if name != "control" and _stored_broken(convert, raw, al, out, cfg, truth):
                        opt_broken.append(f"{codec}/{name}/{r}")
                    continue
                cases += name != "control"
                try:
                    res = convert(raw, al, out, copy=cfg)
                except RobodataError as exc:
                    refused += 1
                    outcome.setdefault(f"{codec}/{name}", f"refused: {exc}"[:160])
                    continue
                except Exception as exc:  # noqa: BLE001 - what this bench counts
                    raw_errors += 1
                    unclear.append(f"{codec}/{name}: {type(exc).__name__}: {exc}"[:200])
                    continue
                d = res.video["top"]
                outcome.setdefault(f"{codec}/{name}", f"{d['mode']}: {d['reason']}"[:160])
                if d["mode"] == "copy":
                    got = EpisodeReader.open(out).read_window(-1.0, float("inf"), ["top"])["top"].data
                    intact = len(got) == len(truth) and all(
                        np.array_equal(a, b) for a, b in zip(got, truth, strict=True)
                    )
                    if name == "control":
                        controls += 1
                        copied_intact += intact
                    elif not intact:
                        stored_broken += 1
                        unclear.append(f"{codec}/{name}/{r}: copied and differs from the source")
                elif name != "control":
                    transcoded += 1
                    if not d["reason"]:
                        unclear.append(f"{codec}/{name}: transcoded without a reason")
                else:
                    controls += 1
    return {
        "cases": cases,
        "stored_broken": stored_broken,
        "raw_errors": raw_errors,
        "transcoded_with_reason": transcoded,
        "refused": refused,
        "copied_lies_intact": cases - transcoded - refused - stored_broken - raw_errors,
        "controls": controls,
        "controls_copied_intact": copied_intact,
        "unclear": unclear[:10],
        "annexb_decode_sample": {
            "cases": opt_cases,
            "stored_broken": len(opt_broken),
            "broken": opt_broken[:10],
        },  # fmt: skip
        "outcomes": outcome,
    }
