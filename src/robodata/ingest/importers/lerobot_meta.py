"""A LeRobot dataset's meta/: info.json and the episode list, read once per process while they
are unchanged (a dataset is one landing item whose episodes are opened one by one; reading its
meta/ again for each made the reads of an item grow with its episode count)."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from robodata.errors import RobodataError
from robodata.ingest.raw import RawEpisodeError
from robodata.names import confine, within

_MEMO: OrderedDict[tuple, Any] = OrderedDict()
_MEMO_SIZE = 16  # datasets


def _stats(root: Path, *patterns: str) -> tuple:
    """(name, size, mtime_ns, inode) of every file the patterns match: the memo's key (a stat, not a read)."""
    out = []
    for pat in patterns:
        for p in sorted(root.glob(pat)):
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((str(p), st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def _remember(key: tuple, value: Any) -> None:
    _MEMO[key] = value
    _MEMO.move_to_end(key)
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)


def dataset_info(root: Path) -> dict:
    """meta/info.json, checked (RawEpisodeError naming the field when it is not a LeRobot dataset's).
    The caller must not change the dict: it is the memo's."""
    key = ("info", str(root), _stats(root, "meta/info.json"))
    if key not in _MEMO:
        _remember(key, _read_info(root))
    return _MEMO[key]


@dataclass
class LeRobotEpisode:
    index: int
    length: int
    version: str
    tasks: list[str]
    row: dict  # v3.0: the episodes-parquet row (file indices, ranges)


def _read_info(root: Path) -> dict:
    path = confine(root, "meta/info.json", field="file", source=root)
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        raise RawEpisodeError(f"{root}: meta/info.json missing (not a LeRobot dataset)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RawEpisodeError(f"{root}/meta/info.json: invalid JSON ({exc})") from None
    if not isinstance(info, dict):
        raise RawEpisodeError(f"{root}/meta/info.json: must be a JSON object, not {type(info).__name__}")
    ver = str(info.get("codebase_version", ""))
    if ver not in ("v2.0", "v2.1", "v3.0"):
        raise RawEpisodeError(f"{root}: unsupported LeRobot codebase_version {ver!r} (v2.1 or v3.0)")
    if not isinstance(info.get("features", {}), dict):
        raise RawEpisodeError(f"{root}/meta/info.json: field 'features' must be an object")
    return info


def declared_robot_type(uri: str) -> str:
    """info.json's robot_type of the dataset holding `uri` ("" when it cannot be read): what a
    quarantined episode's catalog row still says about its embodiment. Local datasets only."""
    try:
        return str(dataset_info(Path(uri.split("#", 1)[0])).get("robot_type") or "")
    except (RobodataError, OSError):
        return ""


def _episode(r: object, ver: str, where: Path) -> LeRobotEpisode:
    if not isinstance(r, dict):
        raise RawEpisodeError(f"{where}: an episode row must be an object, not {type(r).__name__}")
    try:
        tasks = r.get("tasks") or []
        return LeRobotEpisode(int(r["episode_index"]), int(r["length"]), ver, [str(t) for t in tasks], r)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise RawEpisodeError(f"{where}: bad episode row ({type(exc).__name__}: {exc})") from None


def dataset_episodes(uri: str) -> list[LeRobotEpisode]:
    """The dataset's episodes from meta/; RawEpisodeError when meta/ lists none it can read
    (a v3.0 dataset without meta/episodes/, a v2.1 one without meta/episodes.jsonl). Read once
    per process while meta/ is unchanged (each episode of a dataset asks for them)."""
    root = Path(uri.split("#", 1)[0])
    key = ("episodes", str(root), _stats(root, "meta/info.json", "meta/episodes.jsonl", "meta/episodes/*/*.parquet"))
    if key not in _MEMO:
        _remember(key, _read_episodes(root))
    return list(_MEMO[key])


def _read_episodes(root: Path) -> list[LeRobotEpisode]:
    info = dataset_info(root)
    ver = "v3.0" if info["codebase_version"] == "v3.0" else "v2.1"
    if ver == "v2.1":
        path = confine(root, "meta/episodes.jsonl", field="file", source=root)
        try:
            rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        except FileNotFoundError:
            raise RawEpisodeError(f"{path}: missing (a v2.1 dataset lists its episodes there)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RawEpisodeError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
        return [_episode(r, ver, path) for r in rows]
    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    if not files:
        why = "meta/episodes/ holds no episode parquet files (a v3.0 dataset lists its episodes there)"
        raise RawEpisodeError(f"{root}: {why}")
    out = []
    for f in files:
        f = within(root, f, field="meta/episodes file", source=root)
        try:
            rows = pq.read_table(f).to_pylist()
        except Exception as exc:  # pyarrow: ArrowInvalid / OSError for a broken file
            raise RawEpisodeError(f"{f}: unreadable parquet ({type(exc).__name__}: {exc})") from None
        out += [_episode(r, ver, f) for r in rows]
    return sorted(out, key=lambda e: e.index)
