"""bench.robustness semantics section: well-formed recordings that lie (issue 24).

Random well-formed episodes from the MCAP, JPEG-folder and LeRobot importers, each with at most one
injected lie: a clock jump (+3 h on one stream mid-recording), a run of dropped frames (a gap),
a rate lie (declared fps 0, missing, 1e-9 or 3x the truth) or a shape lie (declared frame size
differs from the decoded one). All go through the real ingestion (robodata.ingest.pipeline), then
curation with the default spec, the loader under every preset, LeRobot export, a re-run of the
landing zone through the idempotency check and a re-ingest into a new batch.

    cases                          episodes ingested
    pass_with_wrong_facts          pass rows whose facts differ from the truth (duration, frame
                                   count, rates, streams) or whose lie is not on the row
    pass_not_loadable              pass rows (default spec) a preset they can serve fails to load
    manifests_refused_by_one_item  manifests (default spec, and all rows with containers) a loader
                                   refused, or that failed a batch after one container was deleted
    exports_failed_on_pass_data    LeRobot exports of a family's pass rows that failed
    partial_exports_left           files left behind by an export that failed on a bad row
    reingested_unchanged           unchanged landing items the idempotency check calls fresh
    orphan_containers              containers on disk no catalog row references after a re-ingest
    raw_errors                     exceptions outside RobodataError in any of the above
    wrong_reasons                  (reported) lies quarantined for another reason than theirs

    python -m bench.robustness --quick --section semantics
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from robodata.catalog.table import Catalog
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata.errors import RobodataError
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.dedup import not_cataloged
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth import SynthConfig, make_episode
from robodata.ingest.synth.legacy import write_jpeg_episode
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.ingest.synth.mcap import write_mcap_episode
from robodata.ingest.tables import IngestPaths

FAMILIES = ("mcap", "jpeg", "lerobot")
LIES = ("none", "none", "jump", "gap", "rate", "shape")
EXPECT = {  # the checks a lie may be quarantined (or flagged) by: alignment's, or the importer's / writer's refusal
    "jump": {"clock_continuous"},
    "gap": {"no_frame_gaps"},
    "rate": {"rate_within_tolerance", "readable"},
    "shape": {"readable", "converted"},
}
FPS, STATE_HZ, SECONDS, SIZE = 10.0, 50.0, 5.0, 32
SIZES = {"smoke": 6, "quick": 204, "full": 600}


@dataclass
class Truth:
    family: str
    lie: str
    frames: int  # frames per camera after drops
    span_s: float


def _synth(root: Path, i: int, family: str, lie: str, rng: random.Random) -> tuple[Path | str, Truth]:
    if family == "lerobot":
        return _lerobot(root, i, lie, rng)
    cfg = SynthConfig(
        episodes=1, duration_s=SECONDS, height=SIZE, width=SIZE, fps=FPS, state_hz=STATE_HZ, cameras=("cam",), seed=i
    )
    ep = make_episode(replace(cfg, jitter_frac=0.02), 0)
    ep.episode_id = ep.meta["episode_id"] = f"sem-{family}-{i:04d}"
    t = ep.frame_t["cam"]
    if lie == "gap":
        k = rng.randint(8, 15)
        ep.frame_t["cam"] = t = np.concatenate([t[:10], t[10 + k :]])
    if lie == "jump":
        t[len(t) // 2 :] += 3 * 3600 * 10**9
    cam = ep.meta["cameras"]["cam"]
    if lie == "rate":
        cam["fps"] = rng.choice([0, 1e-9, 3 * FPS])
    if lie == "shape":
        cam["height"], cam["width"] = 2 * SIZE, 2 * SIZE
    path = (write_mcap_episode if family == "mcap" else write_jpeg_episode)(ep, root)
    span = max(float(ep.frame_t["cam"][-1] - ep.frame_t["cam"][0]), float(ep.state_t[-1] - ep.state_t[0])) / 1e9
    return path, Truth(family, lie, len(ep.frame_t["cam"]), span)


def _lerobot(root: Path, i: int, lie: str, rng: random.Random) -> tuple[str, Truth]:
    if lie == "gap":
        lie = "none"  # frames come from the video's packets: a gap would be a re-encode
    n = int(SECONDS * FPS)
    d = root / f"sem-lerobot-{i:04d}"
    write_lerobot(d, "v2.1", episodes=1, frames_per_episode=n, fps=int(FPS), height=SIZE, width=SIZE,
                  cameras=("cam",), seed=i)  # fmt: skip
    info_p = d / "meta" / "info.json"
    info = json.loads(info_p.read_text())
    video = info["features"]["observation.images.cam"]
    if lie == "rate":
        v = rng.choice([0, None, 1e-9, 3 * FPS])
        video["info"].pop("video.fps", None)
        if v is None:
            info.pop("fps")
        else:
            info["fps"] = v
    if lie == "shape":
        video["shape"] = [2 * SIZE, 2 * SIZE, 3]
    info_p.write_text(json.dumps(info))
    if lie == "jump":
        f = d / "data" / "chunk-000" / "episode_000000.parquet"
        t = pq.read_table(f)
        ts = t.column("timestamp").to_numpy().astype(np.float64)
        ts[n // 2 :] += 3 * 3600
        t = t.set_column(t.schema.get_field_index("timestamp"), "timestamp", pa.array(ts, pa.float32()))
        pq.write_table(t, f)
    return f"{d}#0", Truth("lerobot", lie, n, (n - 1) / FPS)


def _facts_wrong(row: dict, truth: Truth) -> list[str]:
    out = []
    if truth.lie != "none" and truth.lie != "gap":
        out.append(f"lie {truth.lie} passed")
    if truth.lie == "gap" and "no_frame_gaps" not in (row["qc_failed"] or []):
        out.append("gap not recorded")
    if abs(row["duration_s"] - truth.span_s) > 2.5 / FPS:
        out.append(f"duration {row['duration_s']:.3f} vs {truth.span_s:.3f}")
    if row["num_frames"] != truth.frames:
        out.append(f"frames {row['num_frames']} vs {truth.frames}")
    rates = json.loads(row["stream_rates_json"] or "{}")
    if not rates.get("cam") or abs(rates["cam"] / FPS - 1) > 0.05:
        out.append(f"cam rate {rates.get('cam')}")
    if "cam" not in (row["streams"] or []) or "joint_pos" not in (row["streams"] or []):
        out.append(f"streams {row['streams']}")
    return out


class _Count:
    def __init__(self) -> None:
        self.n: dict[str, int] = {}
        self.examples: list[str] = []

    def add(self, key: str, what: str = "") -> None:
        self.n[key] = self.n.get(key, 0) + 1
        if what and self.n[key] <= 3:  # the first three of each kind
            self.examples.append(f"{key}: {what}"[:300])

    def guard(self, key: str, fn, *args, **kw):
        """fn(*args); a RobodataError counts under `key`, anything else as a raw error."""
        try:
            return fn(*args, **kw)
        except RobodataError as exc:
            self.add(key, str(exc))
        except Exception as exc:
            self.add("raw_errors", f"{type(exc).__name__}: {exc}")
        return None


def _loadable(manifest: Path, c: _Count, key: str, presets=("wam", "vla"), skipped_ok: set | None = None) -> None:
    import warnings

    from robodata.dataset import PatternDataset

    for p in presets:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = c.guard(key, PatternDataset.from_manifest, manifest, p)
            if ds is None or len(ds) == 0:
                continue
            counts, cum = ds.index.counts, ds.index.cum
            firsts = [int(cum[r] - counts[r]) for r in range(len(counts)) if counts[r] > 0]  # one per episode
            for b in range(0, len(firsts), 16):
                c.guard(key, ds.batch, firsts[b : b + 16])
            if skipped_ok is None:  # every row must serve: a skipped one is a failure
                for row, why in ds.skipped.rows.items():
                    c.add(key, f"{p} row {row}: {why}")
            elif set(ds.skipped.rows) - skipped_ok:
                c.add(key, f"{p}: rows {ds.skipped.rows} skipped, only {sorted(skipped_ok)} are gone")
            ds.close()


def run(size: str) -> dict:
    started = time.perf_counter()
    n = SIZES[size]
    rng = random.Random(24)
    c = _Count()
    for k in ("pass_with_wrong_facts", "pass_not_loadable", "manifests_refused_by_one_item",
              "exports_failed_on_pass_data", "partial_exports_left", "reingested_unchanged",
              "orphan_containers", "raw_errors", "wrong_reasons"):  # fmt: skip
        c.n[k] = 0
    with tempfile.TemporaryDirectory(prefix="robustness-semantics-") as tmp:
        root = Path(tmp)
        land = root / "land"
        land.mkdir()
        truth: dict[str, Truth] = {}
        for i in range(n):
            fam, lie = FAMILIES[i % 3], LIES[(i // 3) % len(LIES)]
            uri, t = _synth(land, i, fam, lie, rng)
            truth[str(uri)] = t
        s = IngestSettings(root=str(root / "state"), workers=2)
        paths = IngestPaths(s.root)
        items = new_items(str(land), LandingCursor())
        per = 60
        for b in range(0, len(items), per):
            write_manifest(paths, f"s{b // per}", items[b : b + per])
            c.guard("raw_errors", run_batch, f"s{b // per}", s, derived=False)
        ids = {}
        for b in range(0, len(items), per):
            for r in paths.read("aligned_tracks", f"s{b // per}", ["uri", "episode_id", "ok"]).to_pylist():
                ids[(r["episode_id"] if r["ok"] else "") or r["uri"]] = r["uri"]
        cat = pl.read_delta(paths.catalog)
        for row in cat.to_dicts():
            found = truth.get(ids.get(row["episode_id"], ""))
            if found is None:
                c.add("pass_with_wrong_facts", f"row {row['episode_id']} of no landing item")
                continue
            t = found
            if row["qc_status"] == "pass" and not (row["qc_failed"] and t.lie == "none"):
                for why in _facts_wrong(row, t):
                    c.add("pass_with_wrong_facts", f"{t.family}/{t.lie} {row['episode_id']}: {why}")
            elif t.lie != "none" and not EXPECT[t.lie] & set(row["qc_failed"] or []):
                c.add("wrong_reasons", f"{t.family}/{t.lie}: {row['qc_reason']}")
        cases = len(cat)
        # curation (default spec, and every row with a container), loader under every preset
        catalog = Catalog(paths.catalog)
        m_default = c.guard("raw_errors", curate, spec_from_dict({"version": 1, "name": "sem"}), catalog, root / "m")
        spec_all = spec_from_dict({"version": 1, "name": "sem-all", "allow_failed_checks": ["*"]})
        m_all = c.guard("raw_errors", curate, spec_all, catalog, root / "m")
        if m_default:
            _loadable(m_default[0].path, c, "pass_not_loadable")
        for m in (m_default, m_all):
            if m:
                _loadable(m[0].path, c, "manifests_refused_by_one_item")
        # exports: one per camera set of the default manifest's rows
        if m_default:
            _exports(m_default[0].path, root, c)
        if m_default:  # a container deleted after curation: the manifest still loads (skip and report)
            man = pq.read_table(m_default[0].path)
            if man.num_rows > 1:
                Path(man.column("uri")[0].as_py()).unlink(missing_ok=True)
                _loadable(m_default[0].path, c, "manifests_refused_by_one_item", ("vla",), skipped_ok={0})
        # idempotent landing: every unchanged item is known; a re-ingest leaves no orphan
        d = c.guard("raw_errors", not_cataloged, new_items(str(land), LandingCursor()), paths.catalog)
        if d is not None:
            c.n["reingested_unchanged"] += len(d.fresh)
        sub = items[: min(len(items), 3 if size == "smoke" else 30)]
        write_manifest(paths, "again", sub)
        c.guard("raw_errors", run_batch, "again", s, derived=False)
        referenced = set(pl.read_delta(paths.catalog)["uri"].to_list())
        on_disk = {str(p) for p in Path(paths.containers).rglob("*.rdep")}
        c.n["orphan_containers"] += len(on_disk - referenced)
    out: dict = {"cases": cases, **c.n, "wall_s": round(time.perf_counter() - started, 1)}
    out["examples"] = c.examples
    return out


def _exports(manifest: Path, root: Path, c: _Count) -> None:
    from robodata.curate.manifest import read_manifest
    from robodata.export.episodes import ExportError
    from robodata.export.lerobot import export_lerobot

    rows = read_manifest(manifest).to_pylist()
    (root / "exports").mkdir(exist_ok=True)
    groups: dict[tuple, list[dict]] = {}  # one LeRobot dataset per feature set (cameras and streams)
    for r in rows:
        groups.setdefault((*sorted(r["cameras"] or ()), *sorted(json.loads(r["stream_rates_json"]))), []).append(r)
    for k, (_features, rs) in enumerate(sorted(groups.items())):
        c.guard("exports_failed_on_pass_data", export_lerobot, rs[:40], root / "exports" / f"ok-{k}")
        bad = [*rs[:3], dict(rs[0], episode_id="missing-one", uri=str(root / "gone.rdep"))]
        out = root / "exports" / f"bad-{k}"
        try:
            export_lerobot(bad, out)
            c.add("partial_exports_left", "an export with a missing container succeeded")
        except ExportError:
            pass
        except Exception as exc:
            c.add("raw_errors", f"{type(exc).__name__}: {exc}")
        left = [p for p in (root / "exports").iterdir() if p.name.startswith((f"bad-{k}", f".bad-{k}"))]
        c.n["partial_exports_left"] += len(left)
