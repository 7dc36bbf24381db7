"""bench.realdata's fixtures from real public recordings (tests/data/real/<name>/SOURCE.md says where
each came from) and, for each, an independent reader: what the recording holds, read with pyarrow,
PyAV, zarr or a protobuf wire-format decoder written here, never through robodata.

A fixture is one `Fixture` entry; another module registers its own by exposing `FIXTURES` and being
named in bench.realdata.MODULES (bench/realdata_bags.py does so for ROS bags).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# Each fixture's record (SOURCE.md, and a bag's topics.yaml) is committed under tests/data/real/<name>/;
# the recordings themselves are not (the workplace keeps fetched data out of developers' commits: a
# fixture's data is laid beside its record, or in a shared/real/ folder, or under $ROBODATA_REAL_DATA).
SOURCES = REPO / "tests" / "data" / "real"
RECORD = frozenset({"SOURCE.md", "topics.yaml"})
WHERE = "$ROBODATA_REAL_DATA, tests/data/real, ../shared/real, ../../shared/real"
MISSING = f"real fixture data not found ({WHERE}; tests/data/real/<name>/SOURCE.md says where it comes from)"


def _holds_data(root: Path) -> bool:
    """Whether some fixture folder under `root` holds more than its committed record."""
    dirs = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
    return any(x.name not in RECORD for d in dirs for x in d.iterdir())


def _roots() -> list[Path]:
    env = os.environ.get("ROBODATA_REAL_DATA")
    places = [Path(env)] if env else []
    return places + [SOURCES, REPO.parent / "shared" / "real", REPO.parent.parent / "shared" / "real"]


# where the fixtures' data lies: the first of _roots() that holds any (SOURCES when none does)
REAL = next((r for r in _roots() if _holds_data(r)), SOURCES)


def present(entry: str) -> bool:
    """Whether a fixture's landing entry (relative to REAL) is here."""
    return (REAL / entry).exists()


@dataclass
class Episode:
    """What one landing item holds, by an independent reader."""

    frames: dict[str, int]  # camera -> frames the episode has ({} for a camera-less recording)
    state: np.ndarray  # (N, D): the stream the source declares as the state
    action: np.ndarray | None  # (N, D) the source's action; None: it has none (an export must refuse)
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # container stream -> (N, D) values
    # what a LeRobot export's rows hold where that differs from state / action (a source whose cameras
    # and state run at different rates: the state sampled at each frame); None: state / action
    export_state: np.ndarray | None = None
    export_action: np.ndarray | None = None

    @property
    def steps(self) -> int:
        """Rows a LeRobot export of this episode holds: its frames (the fullest camera's), else its states."""
        return max(self.frames.values()) if self.frames else len(self.state)


@dataclass(frozen=True)
class Fixture:
    name: str  # the key under "datasets"
    format: str  # what kind of recording it is (reported)
    entry: str  # the landing entry, relative to tests/data/real (a dataset folder, a store, a file)
    read: Callable[[Path], dict[str, Episode]]  # independent reader of the entry: item key -> Episode
    # landing uri fragment (after '#': an episode index, `<shard>:<index>:<offset>`; "" for an entry that
    # is one item, a bag) -> the reader's item key
    key: Callable[[str], str] = lambda frag: frag
    settings: dict[str, Any] = field(default_factory=dict)  # IngestSettings fields; paths relative to REAL
    smoke: bool = False  # part of --smoke


# -- LeRobot (pyarrow + PyAV) -------------------------------------------------------------------


def _lerobot_episodes(root: Path, info: dict) -> list[dict]:
    import pyarrow.parquet as pq

    if info["codebase_version"] == "v3.0":
        return [
            r for f in sorted((root / "meta" / "episodes").glob("*/*.parquet")) for r in pq.read_table(f).to_pylist()
        ]
    return [json.loads(x) for x in (root / "meta" / "episodes.jsonl").read_text().splitlines() if x.strip()]


def _video_file(root: Path, info: dict, row: dict, key: str) -> tuple[Path, float]:
    chunk = row["episode_index"] // info.get("chunks_size", 1000)
    if info["codebase_version"] != "v3.0":
        rel = info["video_path"].format(episode_chunk=chunk, video_key=key, episode_index=row["episode_index"])
        return root / rel, 0.0
    c, f = row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"]
    return root / info["video_path"].format(video_key=key, chunk_index=c, file_index=f), row[
        f"videos/{key}/from_timestamp"
    ]


def _frames_on_rows(path: Path, t_from: float, ts: np.ndarray) -> int:
    """How many parquet rows have a video frame at their time (LeRobot: one frame per row)."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        tb = float(s.time_base or 0)
        pts = np.array(sorted(float(p.pts * tb) for p in c.demux(s) if p.pts is not None))
    want = t_from + ts
    i = np.clip(np.searchsorted(pts, want), 1, len(pts) - 1)
    near = np.minimum(np.abs(pts[i] - want), np.abs(pts[i - 1] - want))
    return int((near < 1e-3).sum())


def read_lerobot(root: Path) -> dict[str, Episode]:
    """Each episode's parquet rows (state / action columns by the names the dataset declares) and,
    per camera, how many rows its video holds a frame for."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    info = json.loads((root / "meta" / "info.json").read_text())
    feats = info["features"]
    state_key = next(k for k in ("observation.state", "state") if k in feats)
    action_key = next((k for k in ("action", "actions") if k in feats), None)
    out = {}
    for row in _lerobot_episodes(root, info):
        idx = row["episode_index"]
        chunk = idx // info.get("chunks_size", 1000)
        if info["codebase_version"] == "v3.0":
            rel = info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
        else:
            rel = info["data_path"].format(episode_chunk=chunk, episode_index=idx)
        t = pq.read_table(root / rel)
        t = t.filter(pc.equal(t["episode_index"], idx))
        ts = t["timestamp"].to_numpy().astype(np.float64)
        frames = {}
        for key, ft in feats.items():
            if ft.get("dtype") == "video":
                path, t_from = _video_file(root, info, row, key)
                frames[key.rsplit(".", 1)[-1]] = _frames_on_rows(path, t_from, ts)
        state = np.array(t[state_key].to_pylist(), np.float32)
        action = np.array(t[action_key].to_pylist(), np.float32) if action_key else None
        out[str(idx)] = Episode(frames, state, action)
    return out


# -- Zarr replay buffer (zarr) -------------------------------------------------------------------


def read_zarr_pusht(store: Path) -> dict[str, Episode]:
    """diffusion_policy's PushT buffer: `state` (agent x, y, block x, y, angle: pixel space), `action`
    (target x, y), `keypoint` (9 x 2), `n_contacts`, 96x96 `img`; episodes cut at meta/episode_ends."""
    import zarr

    g: Any = zarr.open_group(str(store), mode="r")
    ends = np.asarray(g["meta/episode_ends"][:], np.int64)
    out = {}
    for i, hi in enumerate(ends):
        lo = int(ends[i - 1]) if i else 0
        n = int(hi) - lo
        extra = {
            "keypoint": np.asarray(g["data/keypoint"][lo:hi], np.float32).reshape(n, -1),
            "n_contacts": np.asarray(g["data/n_contacts"][lo:hi], np.float32).reshape(n, -1),
        }
        state = np.asarray(g["data/state"][lo:hi], np.float32)
        action = np.asarray(g["data/action"][lo:hi], np.float32)
        out[str(i)] = Episode({"img": n}, state, action, extra)
    return out


# -- RLDS / TFRecord (the tf.train.Example protobuf, decoded from its wire format here) -----------


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def _fields(b: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: varints as ints, length-delimited as bytes."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    while i < len(b):
        tag, i = _varint(b, i)
        num, wt = tag >> 3, tag & 7
        v: Any
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i : i + n], i + n
        elif wt == 5:
            v, i = b[i : i + 4], i + 4
        elif wt == 1:
            v, i = b[i : i + 8], i + 8
        else:
            raise ValueError(f"wire type {wt}")
        out.append((num, wt, v))
    return out


def _feature(b: bytes) -> list | np.ndarray:
    """tf.train.Feature: bytes_list (1) -> [bytes], float_list (2) -> float32, int64_list (3) -> int64."""
    for num, _, v in _fields(b):
        items = _fields(v)
        if num == 1:
            return [x for _, _, x in items]
        if num == 2:
            # packed (one length-delimited run) or not (one fixed32 each): little-endian float32s either way
            return np.frombuffer(b"".join(x for _, _, x in items), "<f4")
        if num == 3:
            vals = []
            for _, wt, x in items:
                if wt == 2:
                    j = 0
                    while j < len(x):
                        v, j = _varint(x, j)
                        vals.append(v - (1 << 64) if v >= 1 << 63 else v)
                else:
                    vals.append(x)
            return np.array(vals, np.int64)
    return []


def _example(b: bytes) -> dict[str, list | np.ndarray]:
    """tf.train.Example -> {feature name: values}."""
    out = {}
    for num, _, features in _fields(b):
        if num != 1:
            continue
        for _, _, entry in _fields(features):  # map<string, Feature> entries: key (1), value (2)
            kv = {n: v for n, _, v in _fields(entry)}
            out[kv[1].decode()] = _feature(kv.get(2, b""))
    return out


def _records(path: Path) -> list[bytes]:
    data, out, i = path.read_bytes(), [], 0
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i : i + 8])
        out.append(data[i + 12 : i + 12 + n])
        i += 16 + n
    return out


def read_rlds(root: Path) -> dict[str, Episode]:
    """Every record of every TFRecord shard: one episode of `steps/...` features (RLDS)."""
    out = {}
    for shard in sorted(root.glob("*/*.tfrecord-*")):
        for k, rec in enumerate(_records(shard)):
            f = _example(rec)
            n = len(f["steps/is_first"])
            cams = {key.rsplit("/", 1)[-1]: len(v) for key, v in f.items() if key.startswith("steps/observation/image")}
            state = np.asarray(f["steps/observation/state"], np.float32).reshape(n, -1)
            action = np.asarray(f["steps/action"], np.float32).reshape(n, -1)
            out[f"{shard.name}:{k}"] = Episode(cams, state, action)
    return out


def rlds_key(frag: str) -> str:
    """`<version>/<shard>:<index>:<offset>` -> `<shard>:<index>`."""
    shard, index, _ = frag.rsplit(":", 2)
    return f"{shard.rsplit('/', 1)[-1]}:{index}"


FIXTURES = [
    Fixture("lerobot_v21_g1_av1", "lerobot-v2.1", "lerobot_v21_g1_av1", read_lerobot),
    Fixture("lerobot_v30_open50", "lerobot-v3.0", "lerobot_v30_open50", read_lerobot),
    Fixture("rlds_octo_bridge_debug", "rlds", "rlds_octo_bridge_debug/bridge_dataset", read_rlds, rlds_key),
    Fixture("zarr_pusht_dp", "zarr", "zarr_pusht_dp/pusht_cchi_v7_replay.zarr", read_zarr_pusht, smoke=True),
]
