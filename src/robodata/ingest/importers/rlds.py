"""RLDS / TFDS datasets (Open X-Embodiment, DROID, BridgeData V2) without TensorFlow -> RawEpisode.

A TFDS dataset folder holds `dataset_info.json`, `features.json` and TFRecord shards
(`<name>-<split>.tfrecord-NNNNN-of-MMMMM`); each record is one RLDS episode, a tf.train.Example
whose `steps/<key>` features hold every step's values back to back (robodata.ingest.importers.tfrecord).
Item uri `<dataset>#<shard file>:<record index>`. Streams by key map (keys relative to `steps/`:
`observation/image` -> camera `image`, `observation/state`, `action`, `language_instruction`),
OXE's per-dataset key differences by a declared map (robodata.ingest.importers.keymap).
Images are decoded per step on the way to the encoder; is_first / is_last frame the episode (a record
that never sets is_last is framed by is_first and the record's end, with a finding: `_steps`). A
frame whose size contradicts the image shape features.json declares is refused naming the field
(robodata.ingest.importers.tfds_features), as is a step key holding another number of values a step
than its declared tensor shape, and a record holding a feature twice (robodata.ingest.importers.tfrecord).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from robodata.codecs.image import image_shape
from robodata.ingest import format_kinds
from robodata.ingest.importers.fixed_rate import CameraSource, StepEpisode, decode_encoded, guarded, to_raw
from robodata.ingest.importers.keymap import choose
from robodata.ingest.importers.layout import KeyInfo, plan
from robodata.ingest.importers.tfds_features import (
    contradicts,
    image_shapes,
    load_features,
    tensor_shapes,
    values_per_step,
)
from robodata.ingest.importers.tfrecord import parse_example, read_record, record_offsets
from robodata.ingest.raw import RawEpisode, RawEpisodeError
from robodata.names import confine, confine_tree

SKIP = ("is_first", "is_last", "is_terminal")


def dataset_dir(root: Path) -> Path:
    """The folder holding dataset_info.json: the item itself or its one version folder."""
    if (root / "dataset_info.json").is_file():
        return root
    found = sorted(p.parent for p in root.glob("*/dataset_info.json"))
    if not found:
        raise RawEpisodeError(f"{root}: no dataset_info.json (not a TFDS dataset folder)")
    return found[-1]  # the newest version


def shards(root: Path) -> list[Path]:
    return sorted(p for p in dataset_dir(root).iterdir() if ".tfrecord" in p.name and p.is_file())


def list_episodes(root: Path) -> list[str]:
    """`<shard>:<index>:<offset>` of every record (a truncated shard's cut record too: its import
    quarantines it with the reason)."""
    out = []
    for s in shards(root):
        with open(s, "rb") as f:
            offsets = record_offsets(f)
        rel = s.relative_to(root)
        out += [f"{rel}:{i}:{off}" for i, off in enumerate(offsets)]
    return out


def _steps(feats: dict, where: str, issues: list[str]) -> int:
    """The record's step count, checked against steps/is_first and steps/is_last. An episode is one
    record: is_first set at step 0 only, is_last at the last step only. A record whose is_last is
    never set (octo's debug set; TFDS and dlimp read it) is framed by is_first and the record's end:
    accepted, with an `is_last_unset:` finding. Anything else is refused naming the flag."""
    first, last = feats.get("steps/is_first"), feats.get("steps/is_last")
    if first is None or last is None:
        raise RawEpisodeError(f"{where}: missing key 'steps/is_first' / 'steps/is_last' (not an RLDS episode)")
    n = len(first)
    if n == 0:
        raise RawEpisodeError(f"{where}: zero steps")
    if len(last) != n:
        raise RawEpisodeError(f"{where}: steps/is_last holds {len(last)} flags for {n} steps (steps/is_first)")
    set_first = np.flatnonzero(np.asarray(first)).tolist()
    if set_first != [0]:
        raise RawEpisodeError(
            f"{where}: steps/is_first is set at steps {set_first[:5]} of {n}; "
            "an episode's record sets it at step 0 only"
        )
    set_last = np.flatnonzero(np.asarray(last)).tolist()
    if not set_last:
        issues.append(
            f"is_last_unset: {where}: steps/is_last is set at no step; the episode is framed by "
            f"steps/is_first and the record's end ({n} steps)"
        )
    elif set_last != [n - 1]:
        raise RawEpisodeError(
            f"{where}: steps/is_last is set at steps {set_last[:5]} of {n}; an episode's record sets it at "
            f"its last step ({n - 1}) only"
        )
    return n


def _declared_values(feats: dict, shapes: dict, n: int, where: str, features: Path) -> None:
    """Each numeric step key holds n x the values a step of its declared tensor shape holds (an
    episode-level key, `episode_metadata/...`, the values of one): a record storing 6 values a step
    for a declared 7 would otherwise be cut into rows that mix steps."""
    for key, shape in shapes.items():
        v, per = feats.get(key), values_per_step(shape)
        if per is None or not isinstance(v, np.ndarray):
            continue
        if not key.startswith("steps/"):
            if len(v) != per:
                raise RawEpisodeError(
                    f"{where}: field {key} holds {len(v)} values; {features} declares shape {list(shape)} ({per})"
                )
        elif len(v) != n * per:
            raise RawEpisodeError(
                f"{where}: field {key} holds {len(v)} values for {n} steps ({len(v) / n:g} a step); {features} "
                f"declares shape {list(shape)} ({per} a step)"
            )


def open_rlds(uri: str, key_map: str = "") -> RawEpisode:
    return guarded(_open, uri, key_map, "RLDS episode")


def _open(uri: str, key_map: str) -> RawEpisode:
    base, _, frag = uri.partition("#")
    root = Path(base)
    try:
        rel, idx, off = frag.rsplit(":", 2)
        index, offset = int(idx), int(off)
    except ValueError:
        raise RawEpisodeError(f"{uri}: item fragment {frag!r} is not <shard>:<index>:<offset>") from None
    shard = confine(root, rel, field="TFRecord shard", source=root)
    confine_tree(root, field="symlink", source=root)  # features.json, dataset_info.json: no link out
    where = f"{shard} episode {index}"
    record = read_record(shard, offset)
    feats = parse_example(record, where)
    issues: list[str] = []
    n = _steps(feats, where, issues)
    features = load_features(dataset_dir(root))
    _declared_values(feats, tensor_shapes(features), n, where, dataset_dir(root) / "features.json")
    keys: dict[str, KeyInfo] = {}
    for k, v in feats.items():
        if not k.startswith("steps/") or k.rsplit("/", 1)[-1] in SKIP:
            continue
        key = k[len("steps/") :]
        if isinstance(v, list):
            keys[key] = KeyInfo((len(v),), "O")
        else:
            if len(v) % n:
                raise RawEpisodeError(f"{where}: steps/{key} holds {len(v)} values, not a multiple of {n} steps")
            keys[key] = KeyInfo((n, len(v) // n), f"{v.dtype.kind}{v.dtype.itemsize}")
    km = choose(format_kinds.RLDS, f"{root.name}#{frag}", key_map)
    lang = ""
    if km.language and isinstance(feats.get(f"steps/{km.language}"), list) and feats[f"steps/{km.language}"]:
        lang = feats[f"steps/{km.language}"][0].decode("utf-8", "replace")
        keys.pop(km.language, None)
    lay = plan(km, keys, where)
    arrays = {s: (np.asarray(feats[f"steps/{k}"]).reshape(n, -1), ()) for s, k in lay.arrays.items()}
    cameras: dict[str, CameraSource] = {}
    declared = image_shapes(features)
    for s, k in lay.cameras.items():
        imgs = feats[f"steps/{k}"]
        if not isinstance(imgs, list) or len(imgs) != n:
            raise RawEpisodeError(f"{where}: camera steps/{k} has {len(imgs)} images for {n} steps")
        first = decode_encoded(imgs[0], f"{where} steps/{k} step 0")
        h, w = image_shape(first)[:2]
        want = declared.get(f"steps/{k}")
        if want is not None and contradicts(want, h, w):
            raise RawEpisodeError(
                f"{dataset_dir(root) / 'features.json'}: field steps/{k} image shape declares "
                f"{'x'.join('?' if d is None else str(d) for d in want)}, frames decode as {h}x{w}x3"
            )

        def frames(imgs: list = imgs, k: str = k) -> Iterator:
            for i, b in enumerate(imgs):
                yield decode_encoded(b, f"{where} steps/{k} step {i}")

        cameras[s] = (n, int(h), int(w), frames)
    info = _info(root)
    shard_no = [p.name for p in shards(root)].index(shard.name) if shard.name in {p.name for p in shards(root)} else 0
    ep = StepEpisode(
        f"{root.name}-{shard_no:05d}-{index:06d}",
        format_kinds.RLDS,
        uri,
        float(km.fps),  # 0: TFDS declares no rate; the key map's `fps` is the only source
        arrays,
        cameras,
        robot=km.robot_type,
        task=lang,
        source_dataset=str(info.get("name") or root.name),
        epoch_ns=int(shard.stat().st_mtime * 1e9),
        issues=issues,
        units=dict(km.units),
        camera_keys={s: f"steps/{k}" for s, k in lay.cameras.items()},
        camera_roles=km.roles_of(lay.cameras),
    )
    raw = to_raw(ep)
    raw.input_bytes = len(record)  # the work bound's input (robodata.ingest.importers.bounds)
    return raw


def _info(root: Path) -> dict:
    try:
        doc = json.loads((dataset_dir(root) / "dataset_info.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}
