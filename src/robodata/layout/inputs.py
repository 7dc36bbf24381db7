"""What `advise` starts from: a read pattern (preset name or file) and sample episodes
(paths, directories, globs, or a random sample of a Delta catalog)."""

from __future__ import annotations

import glob
import json
import os
import random
from pathlib import Path

import yaml

from robodata.container import EpisodeMeta
from robodata.dataset.pattern import ReadPattern, preset
from robodata.errors import ConfigError


def resolve_pattern(spec: str, meta: EpisodeMeta | None = None) -> ReadPattern:
    """A preset name (wam, vla: cameras and every stream's rate taken from `meta`) or a YAML/JSON
    ReadPattern file."""
    if os.path.isfile(spec):
        text = Path(spec).read_text()
        try:
            data = json.loads(text) if spec.endswith(".json") else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{spec}: cannot parse read pattern: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{spec}: a read pattern is a mapping, got {type(data).__name__}")
        return ReadPattern.from_dict(data)
    if meta is None:
        return preset(spec)
    cams = tuple(s for s, sp in meta.streams.items() if sp.kind == "video")
    if not cams:  # a camera-less episode (IMU, odometry, telemetry): the preset's state / action windows
        rates = {s: sp.rate_hz for s, sp in meta.streams.items() if sp.kind == "array" and sp.rate_hz > 0}
        state_hz = rates.get("joint_pos") or rates.get("cmd") or max(rates.values(), default=100.0)
        return preset(spec, cameras=(), state_hz=state_hz, action_hz=rates.get("cmd"))
    fps = min(meta.streams[c].rate_hz for c in cams)
    # every stream at its own rate (a LeRobot import has its state at the camera rate, not the
    # preset's 100 Hz: WAM's 4 s state window would otherwise span 13 s of a 30 Hz stream)
    rate = {s: sp.rate_hz for s, sp in meta.streams.items() if sp.rate_hz and sp.rate_hz > 0}
    state_hz = rate.get("joint_pos") or rate.get("cmd") or fps
    return preset(spec, cameras=cams, fps=fps, state_hz=state_hz, action_hz=rate.get("cmd") or state_hz)


def weighted_spec(spec: str) -> tuple[str, float]:
    """`PATTERN[:WEIGHT]` -> (pattern, weight); a pattern without a weight counts 1.

    Raises:
        ConfigError: a weight that is not a number > 0.
    """
    head, sep, tail = spec.rpartition(":")
    if not sep or not head or os.path.exists(spec):
        return spec, 1.0
    try:
        weight = float(tail)
    except ValueError:
        return spec, 1.0  # a colon in a file name
    if not (0 < weight < float("inf")):
        raise ConfigError(f"{spec}: a pattern's weight must be a number > 0, got {tail!r}")
    return head, weight


def expand_episodes(items: list[str]) -> list[str]:
    """Container paths from paths, directories (*.rdep inside) and globs; URLs pass through."""
    out: list[str] = []
    for it in items:
        if "://" in it:
            out.append(it)
        elif os.path.isdir(it):
            out += sorted(str(p) for p in Path(it).glob("*.rdep"))
        elif any(ch in it for ch in "*?["):
            out += sorted(glob.glob(it))
        elif os.path.exists(it):
            out.append(it)
        else:
            raise ConfigError(f"no such episode container: {it}")
    if not out:
        raise ConfigError(f"no episode containers found in {items}")
    return out


def sample_catalog(catalog_uri: str, n: int, seed: int = 0, storage_options: dict[str, str] | None = None) -> list[str]:
    """Up to n random episode uris from a Delta catalog, reading the uri column of a few random
    files only (bounded memory whatever the catalog's size)."""
    from deltalake import DeltaTable

    dt = DeltaTable(catalog_uri, storage_options=storage_options or None)
    frags = list(dt.to_pyarrow_dataset().get_fragments())
    rng = random.Random(seed)
    rng.shuffle(frags)
    uris: list[str] = []
    for f in frags:
        tab = f.to_table(columns=["uri", "qc_status"])
        uris += [
            u
            for u, q in zip(tab.column("uri").to_pylist(), tab.column("qc_status").to_pylist(), strict=True)
            if q != "quarantined"
        ]
        if len(uris) >= 4 * n:
            break
    if not uris:
        raise ConfigError(f"catalog {catalog_uri} has no episode to sample")
    return rng.sample(uris, min(n, len(uris)))
