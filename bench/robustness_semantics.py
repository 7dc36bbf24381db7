"""bench.robustness semantics section: well-formed recordings that lie (issue 24).

Random well-formed episodes from every importer family (MCAP, JPEG folders, LeRobot, ROS 1 bags,
ROS 2 bags with vendor .msg types, HDF5 ALOHA and robomimic, Zarr replay buffers, RLDS/TFDS),
each with at most one injected lie the format can carry (bench/robustness_semantics_lies.py says
which): a clock jump (+3 h on one stream mid-recording), a run of dropped frames (a gap), a rate
lie (a declared rate that is 0, missing, absurd, 3x the truth or contradicts another declaration;
bag header stamps ticking at 3x the receive clock), a shape lie (a declared frame size other than
the decoded one, or one frame mid-stream of another size) or a count lie (a declared step count or
episode boundary that contradicts the data). All go through the real ingestion
(robodata.ingest.pipeline), then curation with the default spec, the loader under every preset,
LeRobot export, a re-run of the landing zone through the idempotency check and a re-ingest into a
new batch.

    cases                          episodes ingested
    pass_with_wrong_facts          pass rows whose facts differ from the truth (duration, frame
                                   count, rates, streams, stored frame size) or whose lie is not
                                   on the row
    pass_not_loadable              pass rows (default spec) a preset they can serve fails to load,
                                   over the whole manifest and per stream set (each family's
                                   cameras: robomimic's `cam_image` never serves a preset laid
                                   over an MCAP row's `cam`); without an action stream (ROS 1
                                   JointState) the vla shape without its action window
    pass_rows_sampled_by_no_pattern (reported) pass rows too short for every pattern of their set
    manifests_refused_by_one_item  manifests (default spec, and all rows with containers) a loader
                                   refused, or that failed a batch after one container was deleted
    exports_failed_on_pass_data    LeRobot exports of a family's pass rows that failed
    exports_wrong                  exported episodes whose rows are not their container's frames, whose
                                   action column is the state, or that were exported without an action
    partial_exports_left           files left behind by an export that failed on a bad row
    reingested_unchanged           unchanged landing items the idempotency check calls fresh
    orphan_containers              containers on disk no catalog row references after a re-ingest
    raw_errors                     exceptions outside RobodataError in any of the above, and
                                   quarantine reasons that are one (`converted: ValueError: ...`)
    wrong_reasons                  (reported) lies quarantined for another reason than theirs, or
                                   clean recordings with a failed check
    outcomes                       (reported) rows per family/lie and QC status

    python -m bench.robustness --quick --section semantics
"""

from __future__ import annotations

import json
import random
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from bench.robustness_semantics_lies import EXPECT, FAMILIES, LIES, Truth, write_case
from bench.robustness_semantics_real import ALLOWED as FINDINGS_ALLOWED
from bench.robustness_semantics_real import NAMES as VARIATION_NAMES
from bench.robustness_semantics_real import export_wrong
from robodata.catalog.table import Catalog
from robodata.container import EpisodeReader
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata.errors import RobodataError
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.dedup import not_cataloged
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps.episode_metadata import landing_id
from robodata.ingest.tables import IngestPaths

SIZES = {"smoke": 9, "quick": 216, "full": 648}
# a quarantine reason that is a library's exception (`check: ValueError: ...`), not a RobodataError naming the file
RAW_REASON = re.compile(r"(?:^|; )[a-z_]+: ([A-Z][A-Za-z]*(?:Error|Exception)): ")


def _facts_wrong(row: dict, truth: Truth) -> list[str]:
    out = []
    if truth.lie not in ("none", "gap", *VARIATION_NAMES):
        out.append(f"lie {truth.lie} ({truth.what}) passed")
    missing = truth.findings - set(row["qc_failed"] or [])
    if missing:
        out.append(f"findings {sorted(missing)} not on the row")
    if "rate_declared" in truth.findings and row["control_hz"] is not None:
        out.append(f"control_hz {row['control_hz']} stored where no source declares a rate")
    if truth.lie == "gap" and "no_frame_gaps" not in (row["qc_failed"] or []):
        out.append("gap not recorded")
    if abs(row["duration_s"] - truth.span_s) > 2.5 / truth.fps:
        out.append(f"duration {row['duration_s']:.3f} vs {truth.span_s:.3f}")
    if row["num_frames"] != truth.frames:
        out.append(f"frames {row['num_frames']} vs {truth.frames}")
    rates = json.loads(row["stream_rates_json"] or "{}")
    for stream, hz in ((truth.camera, truth.fps), ("joint_pos", truth.state_hz)):
        if stream and (not rates.get(stream) or abs(rates[stream] / hz - 1) > 0.05):
            out.append(f"{stream} rate {rates.get(stream)} vs {hz}")
    if (truth.camera and truth.camera not in (row["streams"] or [])) or "joint_pos" not in (row["streams"] or []):
        out.append(f"streams {row['streams']}")
    elif not truth.camera and row["cameras"]:
        out.append(f"cameras {row['cameras']} of a camera-less recording")
    elif row["uri"] and truth.camera:
        r = EpisodeReader.open(row["uri"])
        spec = r.meta.streams[truth.camera]
        r.close()
        if tuple(spec.shape[:2]) != truth.shape:
            out.append(f"{truth.camera} frames {spec.shape} vs {truth.shape}")
    return out


class _Count:
    def __init__(self) -> None:
        self.n: dict[str, int] = {}
        self.examples: list[str] = []

    def add(self, key: str, what: str = "") -> None:
        self.n[key] = self.n.get(key, 0) + 1
        if what and self.n[key] <= int(
            __import__("os").environ.get("SEM_EXAMPLES", "3")
        ):  # the first three of each kind
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
    """Each preset over the whole manifest (laid over its first row): the manifest is not refused, and
    every row that can serve it samples; a skipped row is a failure unless in `skipped_ok`."""
    import warnings

    from robodata.dataset import PatternDataset

    for p in presets:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = c.guard(key, PatternDataset.from_manifest, manifest, p)
            if ds is None:
                continue
            _sample_each(ds, c, key, p)
            if skipped_ok is None:  # every row must serve: a skipped one is a failure
                for row, why in ds.skipped.rows.items():
                    c.add(key, f"{p} row {row}: {why}")
            elif set(ds.skipped.rows) - skipped_ok:
                c.add(key, f"{p}: rows {ds.skipped.rows} skipped, only {sorted(skipped_ok)} are gone")
            ds.close()


def _sample_each(ds, c: _Count, key: str, what: str) -> int:
    """The first sample of every episode with one, 16 at a time; returns the episodes sampled."""
    counts, cum = ds.index.counts, ds.index.cum
    firsts = [int(cum[r] - counts[r]) for r in range(len(counts)) if counts[r] > 0]  # one per episode
    for b in range(0, len(firsts), 16):
        c.guard(key, ds.batch, firsts[b : b + 16])
    return len(firsts)


def _patterns(sub: pa.Table) -> list:
    """The presets laid over a stream set; one without an action stream (ROS 1 JointState holds no
    command) gets the vla shape without the action window."""
    from robodata.dataset.pattern import ReadPattern, StreamWindow, preset_for

    if "cmd" in json.loads(sub.column("stream_rates_json")[0].as_py()):
        return [preset_for(sub, p) for p in ("wam", "vla")]
    cams = tuple(sub.column("cameras")[0].as_py())
    fps = json.loads(sub.column("stream_rates_json")[0].as_py())[cams[0]]
    windows = (StreamWindow("cameras", cams, "video", 2, offset=-1), StreamWindow("state", ("joint_pos",)))
    return [ReadPattern("observe", windows, anchor_stride_s=1.0 / fps)]


def _every_family_loads(manifest: Path, c: _Count) -> int:
    """Per stream set (a family's cameras and streams), every pattern it can serve over its rows (train
    and val): every row samples (one too short for a pattern is counted, not failed). Returns rows sampled by none."""
    import warnings

    from robodata.curate.manifest import read_manifest
    from robodata.dataset import DatasetConfig, PatternDataset

    table = read_manifest(manifest)
    groups: dict[tuple, list[int]] = {}
    cols = table["cameras"].to_pylist(), table["stream_rates_json"].to_pylist()
    for i, (cams, rates) in enumerate(zip(*cols, strict=True)):
        groups.setdefault((*sorted(cams or ()), "|", *sorted(json.loads(rates or "{}"))), []).append(i)
    unsampled = 0
    for idx in groups.values():
        sub, sampled = table.take(idx), np.zeros(len(idx), bool)
        for pattern in c.guard("pass_not_loadable", _patterns, sub) or []:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ds = c.guard("pass_not_loadable", PatternDataset, sub, pattern, config=DatasetConfig(split=None))
            if ds is None:
                continue
            _sample_each(ds, c, "pass_not_loadable", pattern.name)
            for row, why in ds.skipped.rows.items():
                c.add("pass_not_loadable", f"{pattern.name} {sub['episode_id'][row]}: {why}")
            sampled |= ds.index.counts > 0
            ds.close()
        unsampled += int((~sampled).sum())
    return unsampled


def run(size: str) -> dict:
    started = time.perf_counter()
    n = SIZES[size]
    rng = random.Random(24)
    c = _Count()
    for k in ("pass_with_wrong_facts", "pass_not_loadable", "manifests_refused_by_one_item",
              "exports_failed_on_pass_data", "exports_wrong", "partial_exports_left", "reingested_unchanged",
              "orphan_containers", "raw_errors", "wrong_reasons"):  # fmt: skip
        c.n[k] = 0
    with tempfile.TemporaryDirectory(prefix="robustness-semantics-") as tmp:
        root = Path(tmp)
        land = root / "land"
        land.mkdir()
        truth: dict[str, Truth] = {}  # landing path (an item's uri before `#`) -> truth
        for i in range(n):
            fam = FAMILIES[i % len(FAMILIES)]
            lie = LIES[fam][(i // len(FAMILIES)) % len(LIES[fam])]
            path, t = write_case(land, root / "msgs", i, fam, lie, rng)
            truth[str(path)] = t
        paths = IngestPaths(str(root / "state"))
        s = IngestSettings(workers=2, msgs=str(root / "msgs"))
        items = new_items(str(land), LandingCursor())
        per = 60
        for b in range(0, len(items), per):
            write_manifest(paths, f"s{b // per}", items[b : b + per])
            c.guard("raw_errors", run_batch, paths, f"s{b // per}", s, derived=False)
        ids = {}
        for b in range(0, len(items), per):
            for r in paths.read("aligned_tracks", f"s{b // per}", ["uri", "episode_id", "ok"]).to_pylist():
                # an item that did not read is keyed in the catalog by its landing id (issue 41)
                ids[(r["episode_id"] if r["ok"] else landing_id(r["uri"])) or r["uri"]] = r["uri"]
        cat = pl.read_delta(paths.catalog)
        outcomes: dict[str, dict[str, int]] = {}  # family/lie -> qc_status -> rows
        for row in cat.to_dicts():
            found = truth.get(ids.get(row["episode_id"], "").partition("#")[0])
            if found is None:
                c.add("pass_with_wrong_facts", f"row {row['episode_id']} of no landing item")
                continue
            t, failed = found, set(row["qc_failed"] or [])
            tally = outcomes.setdefault(f"{t.family}/{t.lie}", {})
            tally[row["qc_status"]] = tally.get(row["qc_status"], 0) + 1
            clean = t.lie == "none" or t.lie in VARIATION_NAMES  # a true recording, as real ones vary
            if clean and failed - t.findings:  # flagged beyond its format's findings: not its truth either
                c.add("wrong_reasons", f"{t.family}/{t.lie} {row['episode_id']}: {row['qc_reason']}")
            elif row["qc_status"] == "pass":
                for why in _facts_wrong(row, t):
                    c.add("pass_with_wrong_facts", f"{t.family}/{t.lie} {row['episode_id']}: {why}")
            elif clean or not EXPECT[t.lie] & failed:
                c.add("wrong_reasons", f"{t.family}/{t.lie} ({t.what}): {row['qc_reason']}")
            if RAW_REASON.search(row["qc_reason"] or ""):
                c.add("raw_errors", f"{t.family}/{t.lie} ({t.what}) {row['episode_id']}: {row['qc_reason']}")
        cases = len(cat)
        # curation (default spec, and every row with a container), loader under every preset
        catalog = Catalog(paths.catalog)
        # the default spec, tolerating the findings formats earn (no units, no rate): else it would leave out
        # every LeRobot, Zarr and RLDS row, and nothing below would load or export them
        default = spec_from_dict({"version": 1, "name": "sem", "allow_failed_checks": FINDINGS_ALLOWED})
        m_default = c.guard("raw_errors", curate, default, catalog, root / "m")
        spec_all = spec_from_dict({"version": 1, "name": "sem-all", "allow_failed_checks": ["*"]})
        m_all = c.guard("raw_errors", curate, spec_all, catalog, root / "m")
        unsampled = 0
        if m_default:
            _loadable(m_default[0].path, c, "pass_not_loadable")
            unsampled = _every_family_loads(m_default[0].path, c)
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
        c.guard("raw_errors", run_batch, paths, "again", s, derived=False)
        referenced = set(pl.read_delta(paths.catalog)["uri"].to_list())
        on_disk = {str(p) for p in Path(paths.containers).rglob("*.rdep")}
        c.n["orphan_containers"] += len(on_disk - referenced)
    out: dict = {"cases": cases, **c.n, "pass_rows_sampled_by_no_pattern": unsampled}
    out["wall_s"] = round(time.perf_counter() - started, 1)
    out["outcomes"] = {k: ", ".join(f"{n} {q}" for q, n in sorted(v.items())) for k, v in sorted(outcomes.items())}
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
    for k, (features, rs) in enumerate(sorted(groups.items())):
        out = root / "exports" / f"ok-{k}"
        if "cmd" not in features:  # no action stream (ROS 1 JointState): refused naming the streams, never guessed
            try:
                export_lerobot(rs[:40], out)
                c.add("exports_wrong", f"{features}: exported without an action stream")
            except ExportError as exc:
                if "no stream is identified as the action" not in str(exc):
                    c.add("exports_failed_on_pass_data", str(exc))
            except Exception as exc:
                c.add("raw_errors", f"{type(exc).__name__}: {exc}")
        elif c.guard("exports_failed_on_pass_data", export_lerobot, rs[:40], out) is not None:
            for why in c.guard("raw_errors", export_wrong, out, rs[:40]) or []:
                c.add("exports_wrong", why)
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
