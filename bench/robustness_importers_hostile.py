"""bench.robustness importers_hostile section (issue 43): hostile recordings for the HDF5, Zarr,
RLDS, ROS 1 and ROS 2 importers (bench/robustness_importers_hostile_cases.py, _bags.py: silent
fills, concealed frames, links out of the item, declared values the bytes contradict, small inputs
declaring huge work), each with one good item of its format.

Every case is opened and converted directly (staged_raw -> align -> convert, as a conversion worker
does; CPU seconds measured around it), then each format's items run as one batch through the real
ingestion stages (run_batch). A case counts against its class when it converted or passed QC:
silent_fills, concealed_frames, reads_outside_root (a link followed: the item converted, or was
refused without naming the link), lies_accepted, unbounded_passed. raw_errors: an exception outside
RobodataError from the direct open, or a bare exception in a quarantine reason. batches_failed:
run_batch raised or a good item did not pass. unclear_reasons: refused without the case's phrase.
max_cpu_s_per_input_mb: the largest CPU seconds per MB of the item's bytes (an item under 64 KB
counts as 64 KB); max_cpu_s: the largest CPU seconds of one case (must stay under 60).
smoke: a dozen cases, quick / full: all (>= 100).

    python -m bench.robustness --quick --section importers_hostile
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from bench.robustness_importers_hostile_bags import bag_cases, rlds_cases
from bench.robustness_importers_hostile_cases import Case, episode, everything, hdf5_cases, zarr_cases

RAW = re.compile(r"(^|: )[A-Z]\w*(Error|Exception|Iteration): ")
COUNTS = {
    "silent_fill": "silent_fills",
    "concealed": "concealed_frames",
    "outside_root": "reads_outside_root",
    "lie": "lies_accepted",
    "unbounded": "unbounded_passed",
}
SMOKE = ("jpeg_cut50_f3", "jpeg_sof_60000_f0", "missing_wrist_rgb_middle", "link_camera_dir", "ends_float")


def _good(land: Path, msgs: Path) -> dict[str, str]:
    """One good item per format: landing entry name by format."""
    from robodata.ingest.synth import arrays, ros

    ep = episode(seed=7)
    out = {}
    out["hdf5"] = arrays.write_aloha(ep, land / "hdf5", compress=True, index=99).name
    out["zarr"] = arrays.write_zarr([ep], land / "zarr", name="good").name
    out["rlds"] = arrays.write_rlds([ep], land / "rlds", name="good").name
    out["ros1"] = ros.write_ros1_bag(ep, land / "ros1").name
    out["ros2"] = ros.write_ros2_bag_custom(ep, land / "ros2", msgs).name
    return out


def _direct(item, settings, scratch: Path) -> tuple[str, str, float]:
    """('pass' | 'refused' | 'raw', reason, CPU seconds) of one item opened and converted directly."""
    from robodata.errors import RobodataError
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert
    from robodata.ingest.importers import staged_raw

    t0 = time.process_time()
    try:
        with staged_raw(item.uri, item.kind, None, 0, settings.import_options) as raw:
            convert(raw, aligned_tracks(raw), scratch / "out.rbd", settings.video)
        outcome, reason = "pass", ""
    except RobodataError as exc:
        outcome, reason = "refused", str(exc)
    except Exception as exc:  # what must never happen: counted as a raw error
        outcome, reason = "raw", f"{type(exc).__name__}: {exc}"
    return outcome, reason, time.process_time() - t0


def _entry(uri: str, land: Path) -> tuple[str, str]:
    rel = Path(uri.partition("#")[0]).relative_to(land)
    return rel.parts[0], rel.parts[1]


def run(size: str) -> dict:
    from robodata.ingest.importers.bounds import input_bytes
    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.pipeline import run_batch
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.tables import IngestPaths

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robustness-importers-hostile-") as tmp:
        root = Path(tmp)
        land, outside, msgs = root / "landing", root / "outside", root / "msgs"
        keep = (lambda name: name in SMOKE) if size == "smoke" else everything
        cases: list[Case] = hdf5_cases(land, outside, keep) + zarr_cases(land, outside, keep)
        cases += rlds_cases(land, outside, keep) + bag_cases(land, outside, msgs, keep)
        good = _good(land, msgs)
        by_entry = {(c.fmt, c.name): c for c in cases}
        paths = IngestPaths(str(root / "state"))
        settings = IngestSettings(workers=1, msgs=str(msgs))
        scratch = root / "scratch"
        scratch.mkdir()
        counts = dict.fromkeys(COUNTS.values(), 0)
        raw_errors, unclear, examples, cpu = 0, [], [], []
        per_fmt: dict[str, list] = {}
        for fmt_dir in sorted(p for p in land.iterdir() if p.is_dir()):
            for item in new_items(str(fmt_dir), LandingCursor()):
                fmt, name = _entry(item.uri, land)
                case = by_entry.get((fmt, name))
                if case is not None and not item.uri.endswith(case.item):
                    continue  # another episode of the entry: not the one the case damaged
                if case is not None or name == good[fmt]:
                    per_fmt.setdefault(fmt, []).append(item)
        judged: dict[str, dict] = {}
        for items in per_fmt.values():
            for item in items:
                key = _entry(item.uri, land)
                if key not in by_entry:
                    continue
                outcome, reason, cpu_s = _direct(item, settings, scratch)
                mb = max(input_bytes(item.uri.partition("#")[0]), 64 << 10) / (1 << 20)
                cpu.append((cpu_s, cpu_s / mb, item.uri))
                judged[item.uri] = {"case": by_entry[key], "outcome": outcome, "reason": reason}
        batches_failed, good_ok = 0, 0
        for fmt, items in sorted(per_fmt.items()):
            batch = f"hostile-{fmt}"
            write_manifest(paths, batch, items)
            try:
                run_batch(paths, batch, settings, derived=False)
            except Exception as exc:  # the batch failed: what must never happen
                batches_failed += 1
                examples.append({"batch": batch, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            rows = paths.read("qc_results", batch).to_pylist()
            summary = {r["uri"]: r for r in rows if r["stage"] == "summary"}
            good_uris = [i.uri for i in items if _entry(i.uri, land)[1] == good[fmt]]
            ok = all(summary.get(u, {}).get("passed") for u in good_uris)
            good_ok += ok
            batches_failed += not ok
            for uri, j in judged.items():
                if uri in summary and j["case"].fmt == fmt:
                    j["passed"] = bool(summary[uri]["passed"])
                    j["qc_reason"] = summary[uri].get("reason") or ""
        for uri, j in judged.items():
            c: Case = j["case"]
            reason = j["reason"] or j.get("qc_reason", "")
            if j["outcome"] == "raw" or RAW.search(j.get("qc_reason", "")):
                raw_errors += 1
                examples.append({"raw": uri, "reason": (j["reason"] or j.get("qc_reason", ""))[:200]})
            elif j["outcome"] == "pass" or j.get("passed"):
                counts[COUNTS[c.cls]] += 1
                examples.append({c.cls: uri})
            elif not c.explained(reason):
                if c.cls == "outside_root":
                    counts["reads_outside_root"] += 1
                unclear.append(f"{c.fmt}/{c.name}: {reason[:200]}")
        worst = max(cpu, default=(0.0, 0.0, ""))
        return {
            "cases": len(judged),
            "by_format": {f: sum(1 for j in judged.values() if j["case"].fmt == f) for f in sorted(per_fmt)},
            "by_class": {k: sum(1 for j in judged.values() if j["case"].cls == k) for k in COUNTS},
            **counts,
            "raw_errors": raw_errors,
            "batches_failed": batches_failed,
            "good_converted": good_ok,
            "unclear_reasons": len(unclear),
            "max_cpu_s": round(worst[0], 2),
            "max_cpu_s_per_input_mb": round(max((x[1] for x in cpu), default=0.0), 2),
            "cases_over_60s_cpu": sum(1 for x in cpu if x[0] > 60),
            "examples": (examples + unclear)[:8],
            "wall_s": round(time.perf_counter() - started, 1),
        }
