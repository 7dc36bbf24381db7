"""One manifest across corpora (issue 37): a catalog holding episodes of several formats with different
camera names, state / action widths and rates, curated into one manifest mixed by corpus, read by role
(robodata.dataset.mixture), its per-corpus statistics and its export per robot type checked.

    python -m bench.mixing --quick    # --smoke: seconds (synthetic corpora + the smoke real fixtures)

The catalog holds the synthetic corpora of bench.mixing_data (lerobot-, rlds-, zarr- and ros2-like)
plus, at --quick and above, every real fixture of bench.realdata whose data is here, ingested by the
real pipeline (the smoke run takes the fixtures marked smoke). The spec mixes by `source_dataset`.

corpora: {corpus: {rows, format, robot_type, cameras, state_dim, action_dim, control_hz}}.
manifest_rows / rows_unusable: the manifest's rows; those the pattern cannot serve (none of its roles,
    shorter than its span), with their reasons in `unusable`.
samples_per_s_mixed: samples read through MixedDataset.batch over the mixed manifest (random sample
    ids, batches of BATCH); wall_s_mixed / cpu_s_mixed beside it.
samples_per_s_single: the same samples (episode and anchor time) read from single-corpus manifests of
    the mixed manifest's size (each corpus's rows repeated under other ids up to that many rows), each
    by the plain PatternDataset with the ReadPattern of its streams in full batches of BATCH; wall_s_single
    / cpu_s_single beside it (bench.mixing_timing).
mixed_vs_single: single seconds over mixed seconds (>= 0.9: the union costs under 10 %). The two
    sides' batches alternate within each of ROUNDS rounds (a load change hits both), after a warm-up
    round; each side's seconds are the sum of its batches' least times over the rounds (the work is
    in every round, other programs' interference only adds); mixed_vs_single_cpu: the same in CPU
    seconds; mixed_vs_single_median_round / _rounds: the median of the rounds' wall ratios and each
    round's; load_1m: the machine's 1-minute load average before and after the timing.
wrong_values: samples whose unpadded state / action differ from the container's sample nearest each
    step (read here with EpisodeReader.read_window), or whose camera frames differ from what the
    single-corpus PatternDataset returns for the same anchor.
mask_errors: samples whose dimension mask is not the row's own width, whose padding is not zeros, or
    whose camera presence is not the row's binding (a missing camera must be zeros and all-pad).
stats_exact: the per-corpus statistics (robodata.dataset.normstats) equal a NumPy pass over the same
    rows (np.mean / std / min / max of the concatenated streams, float64) to 1e-9 relative;
    stats_max_rel_diff beside it.
exports: {part: {rows, roundtrip_exact}}: each part of the export per robot type (robodata.export.
    per_corpus: a row without one by its source_dataset) read back with
    pyarrow: each row's state / action equal the container's latest samples at or before its
    timestamp (the exporter's documented sample-and-hold); a refused part has roundtrip_exact false and
    its reason in `refused`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from bench import mixing_timing as timing
from bench.common import emit, parse, size_of
from bench.mixing_data import ALIASES, build

KEYS = (
    "corpora",
    "manifest_rows",
    "rows_unusable",
    "samples_per_s_mixed",
    "samples_per_s_single",
    "mixed_vs_single",
    "wrong_values",
    "mask_errors",
    "stats_exact",
    "exports",
    "peak_rss_mb",
)
SIZES = {"smoke": (2, 4.0, 64), "quick": (6, 8.0, 512), "full": (20, 20.0, 2048)}  # per corpus, seconds, samples
BATCH = 32
ROUNDS = 7  # counted rounds of the interleaved timing (bench.mixing_timing), after one warm-up round
REAL_ALIASES = {"front": ["cam_high", "image", "image_0", "img", "top"]}
# The spec: every corpus by its source_dataset (equal weights); rows with no state stream (a pose-only
# bag) are left out by a filter, and counted in `excluded_by_spec`; QC-passed rows whose non-blocking
# checks failed (units_declared, rate_declared, ...) are kept.
SPEC = {
    "version": 1,
    "name": "mix",
    "filters": [{"column": "state_stream", "op": "!=", "value": ""}],
    "mix": {"by": "source_dataset"},
    "split": {"val_fraction": 0},
    "allow_failed_checks": ["*"],
}
PATTERN: dict[str, Any] = {
    "name": "bench-mix",
    "hz": 10,
    "cameras": {"front": list(dict.fromkeys(ALIASES["front"] + REAL_ALIASES["front"])), "wrist": ALIASES["wrist"]},
    "camera": {"length": 2, "offset": -1},
    "state": {"length": 1},
    "action": {"length": 8},
    "resize": [96, 128],
    "anchor_stride_s": 0.5,
}


def real_rows(work: Path, smoke: bool) -> tuple[list[dict], list[str]]:
    """Catalog rows (pass) of every real fixture here, each ingested by the real pipeline; and those missing."""
    from bench.realdata import _ingest, fixtures
    from bench.realdata_fixtures import present
    from robodata.catalog.table import Catalog

    rows, missing = [], []
    for fx in fixtures(smoke):
        if not present(fx.entry):
            missing.append(fx.name)
            continue
        _, _, paths = _ingest(fx, work / fx.name)
        table = Catalog(paths.catalog).table().to_pyarrow_table()
        rows += [r for r in table.to_pylist() if r["qc_status"] == "pass"]
    return rows, missing


def _stream(uri: str, stream: str) -> tuple[np.ndarray, np.ndarray]:
    from robodata.container import EpisodeReader

    r = EpisodeReader.open(uri)
    win = r.read_window(0.0, r.meta.duration_s + 1.0, [stream])
    r.close()
    return np.asarray(win[stream].t), win[stream].data.reshape(len(win[stream].t), -1)


def check_samples(ds: Any, b: dict, rows: list[dict], single: dict[int, dict]) -> tuple[int, int]:
    """(wrong_values, mask_errors) of a mixed batch `b` (see the module docstring)."""
    wrong = masks = 0
    cache: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    hz = PATTERN["hz"]
    for i in range(len(b["t"])):
        row = rows[int(b["episode_index"][i])]
        bad_v = bad_m = False
        for role in ("state", "action"):
            stream = row[f"{role}_stream"]
            key = (row["uri"], stream)
            if key not in cache:
                cache[key] = _stream(*key)
            t, data = cache[key]
            rate = json.loads(row["stream_rates_json"])[stream]
            d, dim = data.shape[1], ds.dims[role]
            bad_m |= b[f"{role}_mask"][i].tolist() != [True] * d + [False] * (dim - d)
            bad_m |= bool(b[role][i, :, d:].any())
            w = PATTERN[role]
            for k in range(w["length"]):
                if bool(b[f"{role}_is_pad"][i, k]):
                    continue
                target = float(b["t"][i]) + round((w.get("offset", 0) + k) * rate / hz) / rate
                j = int(np.argmin(np.abs(t - target)))
                bad_v |= not np.array_equal(b[role][i, k, :d].numpy(), data[j])
        got = single.get(i, {})
        for role in PATTERN["cameras"]:
            present = bool(b[f"{role}_present"][i])
            bad_m |= present != (role in got)
            if not present:
                bad_m |= bool(b[role][i].any()) or not bool(b[f"{role}_is_pad"][i].all())
            elif role in got:
                bad_v |= not np.array_equal(b[role][i].numpy(), got[role])
        wrong += int(bad_v)
        masks += int(bad_m)
    return wrong, masks


def single_frames(ds: Any, ids: np.ndarray) -> dict[int, dict]:
    """Per position of `ids`, the camera frames the plain PatternDataset of its group returns for the
    same sample (what the mixed batch must hold for each present camera role)."""
    import torch

    frames: dict[int, dict] = {}
    per_group: dict[int, list[tuple[int, int]]] = {}
    for pos, k in enumerate(ids):
        g, local = ds.locate(int(k))
        per_group.setdefault(g, []).append((pos, local))
    for g, items in per_group.items():
        group = ds.groups[g]
        for lo in range(0, len(items), BATCH):
            part = items[lo : lo + BATCH]
            got = group.data.batch([local for _, local in part], shared=False)
            for n, (pos, _) in enumerate(part):
                frames[pos] = {
                    role: got[s].index_select(1, torch.tensor(group.picks[s], dtype=torch.int64))[n].numpy()
                    for role, s in group.binding.streams
                    if s is not None and role not in ("state", "action")
                }
    return frames


def stats_check(manifest: Any, stats: dict) -> tuple[bool, float]:
    from robodata.dataset.normstats import corpus_names

    rows, names = manifest.to_pylist(), corpus_names(manifest)
    worst = 0.0
    for corpus in set(names):
        for role in ("state", "action"):
            parts = [_stream(r["uri"], r[f"{role}_stream"])[1] for r, c in zip(rows, names, strict=True) if c == corpus]
            parts = [p for p in parts if len(p)]
            if not parts:
                continue
            x = np.concatenate(parts).astype(np.float64)
            s = stats[corpus][role]
            for key, want in (("mean", x.mean(0)), ("std", x.std(0)), ("min", x.min(0)), ("max", x.max(0))):
                diff = np.abs(np.asarray(s[key]) - want) / np.maximum(np.abs(want), 1.0)
                worst = max(worst, float(diff.max()))
    return worst <= 1e-9, worst


def export_check(rows: list[dict], out: Path) -> dict[str, dict[str, Any]]:
    from robodata.export.per_corpus import export_per_corpus

    result = export_per_corpus(rows, out)
    by_id = {r["episode_id"]: r for r in rows}
    report: dict[str, dict[str, Any]] = {}
    for robot_type, part in result.items():
        if "refused" in part:
            report[robot_type] = {"rows": part["rows"], "roundtrip_exact": False, "refused": part["refused"][:200]}
            continue
        folder = Path(part["dir"])
        info = json.loads((folder / "meta" / "info.json").read_text())
        data = pq.read_table(next((folder / "data").glob("*/*.parquet")))
        eps = pq.read_table(next((folder / "meta" / "episodes").glob("*/*.parquet"))).to_pylist()
        exact = info.get("robot_type") == part["robot_type"]
        col = data["episode_index"].to_numpy()
        for e in eps:
            row = by_id[e["robodata/episode_id"]]
            sel = np.flatnonzero(col == e["episode_index"])
            ts = data["timestamp"].to_numpy()[sel].astype(np.float64)
            for feat, role in (("observation.state", "state"), ("action", "action")):
                t, vals = _stream(row["uri"], row[f"{role}_stream"])
                idx = np.searchsorted(t, ts + 1e-4, side="right") - 1
                got = np.array(data[feat].take(sel).to_pylist(), np.float32)
                exact &= bool((idx >= 0).all()) and np.array_equal(got, vals[np.clip(idx, 0, None)])
        report[robot_type] = {"rows": part["rows"], "roundtrip_exact": bool(exact)}
    return report


def main(argv: list[str] | None = None) -> None:
    from robodata.catalog.table import Catalog
    from robodata.curate.manifest import read_manifest
    from robodata.curate.run import curate
    from robodata.curate.spec import spec_from_dict
    from robodata.dataset import normstats
    from robodata.dataset.mixpattern import MixPattern
    from robodata.dataset.mixture import MixedDataset

    size = size_of(parse(__doc__ or "", argv))
    per, duration, n_samples = SIZES[size]
    with tempfile.TemporaryDirectory(prefix="bench-mixing-") as tmp:
        work = Path(tmp)
        rows = build(work / "synthetic", per, duration)
        real, missing = real_rows(work / "real", size == "smoke")
        cat = Catalog(str(work / "catalog"))
        cat.backfill(rows + real)
        info, _ = curate(spec_from_dict(SPEC), cat, work / "manifests")
        manifest = read_manifest(info.path)
        ds = MixedDataset(manifest, MixPattern.from_dict(PATTERN))
        ids = np.random.default_rng(0).integers(0, len(ds), n_samples)
        load = [round(os.getloadavg()[0], 2)]
        mixed_side = timing.mixed_side(ds, ids, BATCH)
        single_side, singles = timing.single_side(ds, manifest, ids, BATCH)
        timing.interleaved(mixed_side, single_side, ROUNDS)
        timed = timing.ratios(mixed_side, single_side)
        load.append(round(os.getloadavg()[0], 2))
        for d in singles:
            d.close()
        frames = single_frames(ds, ids)
        mrows = manifest.to_pylist()
        wrong = masks = 0
        for lo in range(0, len(ids), BATCH):
            b = ds.batch(ids[lo : lo + BATCH].tolist())
            part = {i: frames[lo + i] for i in range(len(b["t"]))}
            w, m = check_samples(ds, b, mrows, part)
            wrong, masks = wrong + w, masks + m
        stats = normstats.load_or_compute(info.path, manifest)
        exact, worst = stats_check(manifest, stats)
        exports = export_check(mrows, work / "export")
        corpora: dict[str, Any] = {}
        for r, c in zip(mrows, normstats.corpus_names(manifest), strict=True):
            e = corpora.setdefault(c, {"rows": 0, "format": r["source_format"], "robot_type": r["robot_type"]})
            e |= {"cameras": r["cameras"], "state_dim": r["state_dim"], "action_dim": r["action_dim"]}
            e |= {"control_hz": r["control_hz"], "rows": e["rows"] + 1}
        emit(
            {
                "size": size,
                "corpora": corpora,
                "formats": sorted({c["format"] for c in corpora.values()}),
                "fixtures_missing": missing,
                "catalog_rows": len(rows) + len(real),
                "excluded_by_spec": len(rows) + len(real) - manifest.num_rows,
                "manifest_rows": manifest.num_rows,
                "rows_unusable": sum(ds.unusable.values()),
                "unusable": ds.unusable,
                "samples": int(n_samples),
                "batch": BATCH,
                "samples_per_s_mixed": round(n_samples / timed["wall_s_mixed"], 1),
                "samples_per_s_single": round(n_samples / timed["wall_s_single"], 1),
                **timed,
                "load_1m": load,
                "wrong_values": wrong,
                "mask_errors": masks,
                "stats_exact": exact,
                "stats_max_rel_diff": worst,
                "exports": exports,
            }
        )
        ds.close()


if __name__ == "__main__":
    main()
