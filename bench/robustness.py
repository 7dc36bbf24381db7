"""bench.robustness: irregular and hostile input at every layer (issue 16).

Each section lives in its own module, bench/robustness_<section>.py, with
`run(size: str) -> dict` (size: "smoke" | "quick" | "full"); this runner calls them in order and
prints one JSON object. "raw" errors are exceptions outside RobodataError; "silent wrong" is data
returned without an error that differs from what was written.

Must hold at --quick (issue 16): container cases >= 10,000 with raw_errors 0 and silent_wrong 0,
peak RSS per case <= 1 GB; importer cases >= 40 with 0 batches failed by one item; escaped
writes and reads 0; manifest cases >= 500 with 0 round-trip failures; >= 3 concurrent catalog
writers with 0 duplicate ids; uploader kills including >= 3 after "verified", 0 lost, 0 deleted
unverified; spec raw errors 0. Semantics (issue 24): cases >= 200 over every importer (MCAP, JPEG,
LeRobot, ROS 1/2 bags, HDF5 ALOHA/robomimic, Zarr, RLDS) with every other figure 0
(bench/robustness_semantics.py). Stream copy (issue 40): video packets that lie (flags, pts, truncated
or garbage packets, extradata missing or garbage) give 0 stored_broken and 0 raw errors, each
transcoded with its reason (bench/robustness_copy.py). Viewer (issue 43): >= 500 damaged containers through
`robodata view`'s logging, 0 raw errors (bench/robustness_viewer.py). Rows (issue 44): manifests
edited by a hostile editor (bad stream rates, a row's uri swapped to another episode's, http://
uris, no row in the split) through the loader, the export and the viewer: 0 raw errors,
`uri_mismatch_served` 0, `http_requests_from_manifest` 0 (bench/robustness_rows.py). Decode
(issue 44): containers of tens of KB declaring up to a GB, read for 1 ms windows:
`container_decode_peak_mb_per_input_kb` reported, the old-cap case <= 256 MB
(bench/robustness_decode.py). GC (issue 44): ingests killed mid-write and after upload, on a
local root and on S3, then the sweep: `orphans_after_gc` 0, `referenced_deleted` 0
(bench/robustness_gc.py). Terms (issue 44): specs of up to 2,000 filters and a 2M-line exclusion
file curated in fresh processes: `spec_terms_max_rss_mb` <= 500 (bench/robustness_terms.py).
Reasons (issue 44): RLDS / Zarr / HDF5 recordings whose declarations lie (tensor shapes, a feature
twice, length fields, episode_ends short of the arrays) or whose bytes are damaged where a library
raised: every one quarantined, its reason naming file and field, never a bare exception: `raw_errors`,
`passed`, `unnamed` 0 (bench/robustness_reasons.py). Msgs (issue 44): hostile `--msgs` folders (links
outside, files that are not definitions, standard types redefined) refused once as a ConfigError
that echoes no file: `contents_echoed`, `reads_outside`, `refused_per_bag` 0 (bench/robustness_msgs.py).
Importers, hostile (issue 43): >= 100 crafted HDF5, Zarr, RLDS, ROS 1 and ROS 2 recordings give
silent_fills, concealed_frames, reads_outside_root, lies_accepted, unbounded_passed, raw_errors and
batches_failed 0, no case over 60 s of CPU (bench/robustness_importers_hostile.py).
"""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

from bench.common import emit, parse, size_of

SECTIONS = (
    "container",
    "importers",
    "paths",
    "manifest",
    "catalog",
    "upload",
    "spec",
    "semantics",
    "copy",
    "viewer",
    "rows",
    "decode",
    "gc",
    "terms",
    "reasons",
    "msgs",
    "importers_hostile",
)


KEYS = (
    "container.cases",
    "container.raw_errors",
    "container.silent_wrong",
    "importers.batches_failed_by_one_item",
    "paths.escaped_writes",
    "paths.escaped_reads",
    "manifest.cases",
    "catalog.duplicate_ids",
    "upload.lost",
    "upload.deleted_unverified",
    "spec.raw_errors",
    "semantics.cases",
    "semantics.pass_with_wrong_facts",
    "semantics.pass_not_loadable",
    "semantics.manifests_refused_by_one_item",
    "semantics.exports_failed_on_pass_data",
    "semantics.exports_wrong",
    "semantics.partial_exports_left",
    "semantics.reingested_unchanged",
    "semantics.orphan_containers",
    "semantics.raw_errors",
    "copy.cases",
    "copy.stored_broken",
    "copy.raw_errors",
    "copy.annexb_decode_sample.stored_broken",
    "viewer.cases",
    "viewer.raw_errors",
    "viewer.extradata_logged_reader_refuses",
    "rows.cases",
    "rows.raw_errors",
    "rows.uri_mismatch_served",
    "rows.http_requests_from_manifest",
    "decode.cases",
    "decode.raw_errors",
    "decode.container_decode_peak_mb_per_input_kb",
    "decode.old_cap_case_peak_mb",
    "gc.orphans_before",
    "gc.orphans_after_gc",
    "gc.referenced_deleted",
    "terms.raw_errors",
    "terms.spec_terms_max_rss_mb",
    "terms.two_thousand_terms.refused",
    "reasons.cases",
    "reasons.raw_errors",
    "reasons.passed",
    "reasons.unnamed",
    "reasons.batches_failed",
    "msgs.cases",
    "msgs.raw_errors",
    "msgs.contents_echoed",
    "msgs.reads_outside",
    "msgs.refused_per_bag",
    "importers_hostile.cases",
    "importers_hostile.silent_fills",
    "importers_hostile.concealed_frames",
    "importers_hostile.reads_outside_root",
    "importers_hostile.lies_accepted",
    "importers_hostile.unbounded_passed",
    "importers_hostile.raw_errors",
    "importers_hostile.batches_failed",
    "importers_hostile.max_cpu_s",
    "importers_hostile.max_cpu_s_per_input_mb",
    "wall_s",
    "peak_rss_mb",
)


def _options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--section", action="append", choices=SECTIONS, help="run only this section (repeatable)")


def main() -> None:
    args = parse(__doc__.splitlines()[0], extra=_options)
    size = size_of(args)
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    for name in args.section or SECTIONS:
        module = importlib.import_module(f"bench.robustness_{name}")
        out[name] = module.run(size)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    emit(out)


if __name__ == "__main__":
    main()
