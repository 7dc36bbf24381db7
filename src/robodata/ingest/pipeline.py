"""The whole ingestion graph for one batch without an orchestrator (tests, benches, CLI).

The Dagster assets in assets/ingest.py call the same stage functions, one per step.
"""

from __future__ import annotations

import os

from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps.aligned_tracks import align_batch
from robodata.ingest.steps.derived import features_batch, segments_batch
from robodata.ingest.steps.episode_metadata import metadata_batch
from robodata.ingest.steps.episodes import convert_batch
from robodata.ingest.steps.qc_results import post_qc, pre_qc, qc_rollup
from robodata.ingest.steps.raw_episodes import observe
from robodata.ingest.tables import IngestPaths
from robodata.storage import StateRoot, StorageLocation


def run_batch(
    root: str | os.PathLike[str] | StorageLocation | StateRoot,
    batch: str,
    settings: IngestSettings,
    derived: bool = True,
    progress=lambda n: None,
) -> dict:
    """Every stage of a batch under state root `root` in order; `progress(1)` after each (STAGES,
    or STAGES - 2 without derived)."""
    paths = IngestPaths(root)
    out = {"raw_episodes": observe(paths, batch)}
    progress(1)
    out["aligned_tracks"] = align_batch(paths, batch, settings)
    out["unrecognized"] = {k: out["aligned_tracks"][k] for k in ("unrecognized", "unrecognized_reasons")}
    progress(1)
    out["qc_pre"] = pre_qc(paths, batch, settings.qc)
    progress(1)
    out["episodes"] = convert_batch(paths, batch, settings)
    progress(1)
    out["qc_post"] = post_qc(paths, batch, settings.qc)
    progress(1)
    out["qc_results"] = qc_rollup(paths, batch)
    progress(1)
    out["episode_metadata"] = metadata_batch(paths, batch)
    progress(1)
    if derived:
        out["segments"] = segments_batch(paths, batch)
        progress(1)
        out["features"] = features_batch(paths, batch, settings.visual_frames)
        progress(1)
    return out


STAGES = 9
