"""Hostile landing items for ingestion tests and bench.robustness: each is a copy of a good tiny
recording (64x48, ~1 s) with one thing wrong, and the phrase its quarantine reason must hold.

`build(root)` writes `root/landing/` (good items + hostile items) and `root/sentinel/` (files
outside the landing zone that symlinks and escaping names point at: nothing may read them).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from robodata.ingest.synth import SynthConfig, make_episode, synthesize
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.ingest.synth.mcap import write_mcap_episode
from robodata.ingest.topics import TopicRule

TINY = dict(duration_s=1.0, height=48, width=64, fps=10.0, state_hz=50.0, cameras=("cam_left", "wrist"))
# Custom rule a batch runs with: `{name}` may capture slashes, so a hostile topic yields a hostile stream.
TOPICS = (TopicRule(r"/(?P<name>.+)/image/compressed", "video"),)


@dataclass(frozen=True)
class Case:
    name: str  # landing item name (file or folder)
    family: str  # legacy | mcap | lerobot
    expect: str  # substring of its QC summary reason


@dataclass
class Landing:
    landing: Path
    sentinel: Path
    good: list[str]  # item names that must convert and pass
    cases: list[Case]


def _meta_edit(**changes) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        meta = json.loads((d / "meta.json").read_text())
        for k, v in changes.items():
            if v is _DROP:
                meta.pop(k, None)
            else:
                meta[k] = v
        (d / "meta.json").write_text(json.dumps(meta))

    return edit


_DROP = object()


def _camera_edit(**changes) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        meta = json.loads((d / "meta.json").read_text())
        meta["cameras"]["wrist"].update(changes)
        (d / "meta.json").write_text(json.dumps(meta))

    return edit


def _rename_camera(new: str, move: bool = False) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        meta = json.loads((d / "meta.json").read_text())
        meta["cameras"][new] = meta["cameras"].pop("wrist")
        (d / "meta.json").write_text(json.dumps(meta))
        if move:
            (d / "wrist").rename(d / new)

    return edit


def _write(rel: str, data: bytes | str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        p = d / rel
        if isinstance(data, str):
            p.write_text(data)
        else:
            p.write_bytes(data)

    return edit


def _frame(index: int, how: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        f = sorted((d / "wrist").glob("*.jpg"))[index]
        if how == "delete":
            f.unlink()
        elif how == "truncate":
            f.write_bytes(f.read_bytes()[:60])
        elif how == "empty":
            f.write_bytes(b"")
        elif how == "garbage":
            f.write_bytes(bytes(range(256)) * 8)
        elif how == "other_size":  # a frame from a camera at another resolution
            from PIL import Image

            Image.new("RGB", (32, 24), (90, 20, 20)).save(f, format="JPEG")

    return edit


def _timestamps(kind: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        p = d / "cam_left" / "timestamps.csv"
        vals = p.read_text().split()[1:]
        if kind == "words":
            vals[3] = "soon"
        elif kind == "huge":
            vals[3] = str(2**70)
        elif kind == "backwards":
            vals[6] = str(int(vals[1]) - 5_000_000)
        elif kind == "empty":
            vals = []
        p.write_text("t_ns\n" + "\n".join(vals) + ("\n" if vals else ""))

    return edit


def _link(rel: str, target: Path) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        p = d / rel
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
        p.symlink_to(target)

    return edit


def _legacy_cases(sentinel: Path) -> dict[str, tuple[Callable[[Path], None], str]]:
    secret_jpg, secret_dir = sentinel / "secret.jpg", sentinel / "camdir"
    return {
        "id-dotdot": (_meta_edit(episode_id="../../escaped"), "names_safe"),
        "id-abs": (_meta_edit(episode_id=str(sentinel / "abs-id")), "names_safe"),
        "id-int": (_meta_edit(episode_id=12345), "must be a string"),
        "id-nul": (_meta_edit(episode_id="a\x00b"), "names_safe"),
        "id-long": (_meta_edit(episode_id="x" * 400), "characters long"),
        "id-hidden": (_meta_edit(episode_id=".hidden"), "names_safe"),
        "id-space": (_meta_edit(episode_id="two words"), "names_safe"),
        "cam-escape": (_rename_camera(f"a/../../{sentinel.name}/wrist"), "names_safe"),
        "cam-dotdot": (_rename_camera(".."), "names_safe"),
        "cam-empty": (_rename_camera(""), "names_safe"),
        "cam-collides": (_rename_camera("joint_pos", move=True), "names both"),
        "cam-case": (_rename_camera("CAM_LEFT", move=True), "differs only in case"),
        "meta-list": (_write("meta.json", "[1, 2, 3]"), "must be a JSON object"),
        "meta-string": (_write("meta.json", '"hello"'), "must be a JSON object"),
        "meta-invalid": (_write("meta.json", "{not json"), "invalid JSON"),
        "meta-binary": (_write("meta.json", b"\xff\xfe\x00garbage"), "invalid JSON"),
        "meta-cameras-list": (_meta_edit(cameras=["wrist"]), "must be a JSON object"),
        "meta-no-cameras": (_meta_edit(cameras={}), "names no camera"),
        "meta-no-state": (_meta_edit(state=_DROP), "missing or bad field"),
        "meta-height-str": (_camera_edit(height="48"), "height and width"),
        "meta-height-zero": (_camera_edit(height=0), "height and width"),
        "meta-fps-negative": (_camera_edit(fps=-10), "fps must be"),
        "meta-success-str": (_meta_edit(success="yes"), "success"),
        "meta-robot-dict": (_meta_edit(robot={"a": 1}), "must be a string"),
        "meta-start-number": (_meta_edit(start_time=17), "missing or bad field"),
        "ts-words": (_timestamps("words"), "timestamps.csv"),
        "ts-huge": (_timestamps("huge"), "timestamps.csv"),
        "ts-empty": (_timestamps("empty"), "timestamps"),
        "ts-backwards": (_timestamps("backwards"), "timestamps_monotonic"),
        "frame-missing": (_frame(3, "delete"), "JPEG files but"),
        "frame-truncated": (_frame(4, "truncate"), "not a decodable JPEG"),
        "frame-empty": (_frame(5, "empty"), "not a decodable JPEG"),
        "frame-garbage": (_frame(2, "garbage"), "not a decodable JPEG"),
        "frame-other-size": (_frame(1, "other_size"), "meta.json says"),
        "link-frame-out": (_link("wrist/000002.jpg", secret_jpg), "outside"),
        "link-meta-out": (_link("meta.json", sentinel / "meta.json"), "outside"),
        "link-camdir-out": (_link("wrist", secret_dir), "outside"),
        "sync-list": (_write("clock_sync.json", "[[1, 2], [3, 4]]"), "must be a JSON object"),
        "sync-nan": (_write("clock_sync.json", '{"cam_left": [[NaN, 1], [2, 3]]}'), "clock_sync.json"),
        "sync-strings": (_write("clock_sync.json", '{"cam_left": [["a", "b"], ["c", "d"]]}'), "clock_sync.json"),
        "events-garbage": (_write("events.jsonl", "[1]\n7\n"), "events.jsonl"),
        "state-garbage": (_write("state.parquet", b"PAR1 not really"), "state.parquet"),
    }


def _lerobot_edit(change: Callable[[Path, dict], bool | None]) -> Callable[[Path], None]:
    """change(dataset, info) edits the dataset and/or info.json's dict; True: info.json is done."""

    def edit(d: Path) -> None:
        info = json.loads((d / "meta" / "info.json").read_text())
        if not change(d, info):
            (d / "meta" / "info.json").write_text(json.dumps(info))

    return edit


def _set(**kv) -> Callable[[Path, dict], None]:
    def change(d: Path, info: dict) -> None:
        info.update(kv)

    return change


def _lerobot_cases(sentinel: Path) -> dict[str, tuple[Callable[[Path], None], str]]:
    def no_episodes(d: Path, info: dict) -> None:
        shutil.rmtree(d / "meta" / "episodes")

    def link_data(d: Path, info: dict) -> None:
        f = d / "data" / "chunk-000" / "file-000.parquet"
        f.unlink()
        f.symlink_to(sentinel / "secret.parquet")

    def bad_camera(d: Path, info: dict) -> None:
        info["features"]["observation.images.a/../../x"] = info["features"].pop("observation.images.top")

    def missing_video(d: Path, info: dict) -> None:
        shutil.rmtree(d / "videos" / "observation.images.top")

    def info_list(d: Path, info: dict) -> bool:
        (d / "meta" / "info.json").write_text("[]")
        return True

    rel = f"../../{sentinel.name}/secret.parquet"
    return {
        "lr-no-episodes": (_lerobot_edit(no_episodes), "meta/episodes/"),
        "lr-data-escape": (_lerobot_edit(_set(data_path=rel)), "data_path"),
        "lr-data-abs": (_lerobot_edit(_set(data_path=str(sentinel / "secret.parquet"))), "data_path"),
        "lr-video-escape": (_lerobot_edit(_set(video_path=f"../../{sentinel.name}/{{video_key}}.mp4")), "video_path"),
        "lr-data-number": (_lerobot_edit(_set(data_path=7)), "path template"),
        "lr-data-field": (_lerobot_edit(_set(data_path="data/{nope}.parquet")), "bad template"),
        "lr-version": (_lerobot_edit(_set(codebase_version="v9.9")), "codebase_version"),
        "lr-info-list": (_lerobot_edit(info_list), "JSON object"),
        "lr-link-data": (_lerobot_edit(link_data), "outside"),
        "lr-camera-name": (_lerobot_edit(bad_camera), "names_safe"),
        "lr-missing-video": (_lerobot_edit(missing_video), "video of feature 'observation.images.top' is missing"),
    }


def _mcap_cases(landing: Path, sentinel: Path, good: Path) -> dict[str, str]:
    data = good.read_bytes()
    (landing / "mc-empty.mcap").write_bytes(b"")
    (landing / "mc-truncated.mcap").write_bytes(data[: len(data) // 2])
    (landing / "mc-garbage.mcap").write_bytes(b"\x89MCAP0\r\n" + bytes(range(256)) * 16)
    (landing / "mc-link-out.mcap").symlink_to(sentinel / "secret.mcap")
    # a clone without `git lfs pull`, and a hidden entry (issue 36): rows naming what they are
    (landing / "mc-lfs.mcap").write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{'e' * 64}\nsize 9\n")
    (landing / ".mc-hidden.mcap").write_bytes(data)
    out = {
        "mc-empty.mcap": "MCAP",
        "mc-truncated.mcap": "MCAP",
        "mc-garbage.mcap": "MCAP",
        "mc-link-out.mcap": "outside",
        "mc-lfs.mcap": "Git LFS pointer",
        ".mc-hidden.mcap": "hidden landing entry",
    }
    cfg = SynthConfig(episodes=1, format="mcap", **TINY)  # type: ignore[arg-type]
    for name, edit, expect in (
        ("mc-id-escape", {"episode_id": "../../mc-escaped"}, "names_safe"),
        ("mc-success-str", {"success": "maybe"}, "success"),
    ):
        ep = make_episode(cfg, 0)
        ep.meta.update(edit)
        ep.episode_id = name
        write_mcap_episode(ep, landing)
        out[f"{name}.mcap"] = expect
    hostile_cam = f"a/../../{sentinel.name}/cam"  # a topic /a/../../<dir>/cam/image/compressed
    ep = make_episode(SynthConfig(episodes=1, format="mcap", **{**TINY, "cameras": (hostile_cam,)}), 0)  # type: ignore[arg-type]
    ep.episode_id = ep.meta["episode_id"] = "mc-stream-escape"
    write_mcap_episode(ep, landing)
    out["mc-stream-escape.mcap"] = "names_safe"
    return out


def build(root: Path) -> Landing:
    """Good items (two legacy with different camera sets, an MCAP, a LeRobot v3.0 dataset) and
    every hostile case, under root/landing; root/sentinel holds what they point at."""
    landing, sentinel, base = root / "landing", root / "sentinel", root / "base"
    for d in (landing, sentinel, base):
        d.mkdir(parents=True, exist_ok=True)
    (sentinel / "camdir").mkdir()
    for name in ("secret.jpg", "meta.json", "secret.parquet", "secret.mcap", "secret.txt"):
        (sentinel / name).write_bytes(b"sentinel: nothing may read this\n")
    legacy = synthesize(SynthConfig(episodes=1, **TINY), base)[0]  # type: ignore[arg-type]
    one_cam = synthesize(SynthConfig(episodes=1, seed=3, site="site-b", **{**TINY, "cameras": ("wrist",)}), base)[0]  # type: ignore[arg-type]
    mcap = synthesize(SynthConfig(episodes=1, format="mcap", site="site-c", **TINY), base)[0]  # type: ignore[arg-type]
    lerobot = write_lerobot(base / "lr-good", "v3.0", episodes=1, frames_per_episode=10, cameras=("top",))
    good = []
    for src in (legacy, one_cam, mcap, lerobot):
        (shutil.copytree if src.is_dir() else shutil.copy)(src, landing / src.name)
        good.append(src.name)
    cases = []
    for name, (edit, expect) in _legacy_cases(sentinel).items():
        d = shutil.copytree(legacy, landing / f"lg-{name}")
        _meta_edit(episode_id=f"lg-{name}")(d)
        edit(d)
        cases.append(Case(d.name, "legacy", expect))
    dup = shutil.copytree(legacy, landing / f"zz-dup-{legacy.name}")  # same id as the good one, sorts after it
    cases.append(Case(dup.name, "legacy", "episode_id_unique"))
    upper = shutil.copytree(legacy, landing / f"zz-case-{legacy.name}")  # the good id in capitals
    _meta_edit(episode_id=json.loads((legacy / "meta.json").read_text())["episode_id"].upper())(upper)
    cases.append(Case(upper.name, "legacy", "differs only in case"))
    outside = shutil.copytree(legacy, sentinel / "outside-item")
    _meta_edit(episode_id="outside-item")(outside)
    (landing / "lg-item-link-out").symlink_to(outside)
    cases.append(Case("lg-item-link-out", "legacy", "outside"))
    for name, (edit, expect) in _lerobot_cases(sentinel).items():
        d = shutil.copytree(lerobot, landing / name)
        edit(d)
        cases.append(Case(name, "lerobot", expect))
    for name, expect in _mcap_cases(landing, sentinel, mcap).items():
        cases.append(Case(name, "mcap", expect))
    from tests.core.helpers_formats import hostile_format_cases  # HDF5, ROS 1, unknown entries (issue 23)

    more_good, more = hostile_format_cases(landing, base, TINY)
    good += more_good
    cases += [Case(name, "formats", expect) for name, expect in more.items()]
    return Landing(landing, sentinel, good, cases)


def item_name(uri: str) -> str:
    """Landing item name of a uri (a LeRobot `<dir>#<index>` -> `<dir>`)."""
    return uri.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def sentinel_listing(sentinel: Path) -> dict[str, bytes]:
    return {str(p.relative_to(sentinel)): p.read_bytes() for p in sorted(sentinel.rglob("*")) if p.is_file()}


__all__ = ["Case", "Landing", "TINY", "TOPICS", "build", "item_name", "sentinel_listing", "pa", "pq"]


def container_with(path: Path, episode_id: str, camera: str = "wrist", frames: int = 6) -> dict:
    """A tiny container whose id and camera name are what the caller says (bypassing ingestion,
    as a container from elsewhere would), and its manifest-style row for the exporters."""
    import numpy as np

    from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, StreamSpec
    from robodata.container.format import pack_trailer
    from robodata.container.meta import default_layout

    # The writer refuses an unsafe stream name, so an unsafe one is written under a placeholder and
    # then put into the footer by hand (CRC and trailer recomputed): a file made elsewhere.
    unsafe = not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", camera) or set(camera) == {"."}
    cam = "zzplaceholdercamzz" if unsafe else camera
    streams = {cam: StreamSpec(cam, "video", 10.0, (48, 64, 3))}
    streams["joint_pos"] = StreamSpec("joint_pos", "array", 10.0, (3,))
    meta = EpisodeMeta(episode_id, "r1", "site-a", "pick", 1_700_000_000_000_000_000, streams)
    t = (np.arange(frames) * 1e8).astype(np.int64)
    with EpisodeWriter(path, meta, default_layout((cam,), proprio=("joint_pos",))) as w:
        for i, ti in enumerate(t):
            w.write_frame(cam, np.full((48, 64, 3), 20 * i, np.uint8), int(ti))
        w.write_array("joint_pos", t, np.zeros((frames, 3), np.float32))
    r = EpisodeReader.open(path)
    offset, length = r.footer_offset, r.footer_length
    if unsafe:
        data = path.read_bytes()
        doc = _renamed(json.loads(data[offset : offset + length]), cam, camera)
        footer = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
        path.write_bytes(data[:offset] + footer + pack_trailer(offset, footer))
        length = len(footer)
    return {
        "episode_id": episode_id,
        "uri": str(path),
        "task": "pick",
        "footer_offset": offset,
        "footer_length": length,
        "split": "train",
    }


def _renamed(v: Any, old: str, new: str) -> Any:
    """`v` with every string (key or value) equal to `old` replaced by `new`."""
    if isinstance(v, dict):
        return {(new if k == old else k): _renamed(x, old, new) for k, x in v.items()}
    if isinstance(v, list):
        return [_renamed(x, old, new) for x in v]
    return new if v == old else v
