"""Conversion in the alignment's read, for the formats whose alignment reads a recording whole.

An MCAP file, a ROS bag or an RLDS episode keeps each message's (step's) stamps beside its payload,
in the same compressed chunk, record or step, so the aligned_tracks stage has read every byte of
such an item once it has aligned it; a separate episodes stage reads it all again (bench.ingest
`reads`: 2.0x the item's size). For these formats (`Format.one_pass`) the alignment worker, with
the recording in hand:

1. runs the pre-conversion checks (`evaluate_pre`, the run's own selection and thresholds, the same
   function the qc_pre_conversion check runs on the aligned_tracks row);
2. when no blocking one fails, converts the episode into a staged container
   (`StateRoot.staged_container`: keyed by the landing uri, so two recordings claiming one
   episode_id never write one file), and hands on its conversion row (`staged_json` in
   aligned_tracks) with a fingerprint of the settings that shape a container.

The episodes stage then commits a staged container (`commit`: a rename on a local root, a
server-side copy on an object store; never a read of the landing item) when the episode is still
accepted and its fingerprint is the stage's own, and converts as for any other format otherwise.
A staged container that is not committed is removed (`discard`), and the episodes stage clears
the batch's staged folder when it ends (`clear`: a worker that died after staging left one without
a row); one left by a run killed before that is an unreferenced object under containers/, which
`robodata.ingest.sweep` removes past its grace period. What the stages record does not change:
aligned_tracks, the pre-conversion QC rows and the conversions rows are those of separate reads.
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import suppress

from robodata.ingest import formats
from robodata.ingest.align import AlignedTracks
from robodata.ingest.qc import IDENTITY_CHECKS, evaluate_pre
from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps.conversion import convert_into
from robodata.storage import StorageLocation, objects

# what a container does not depend on: how many processes and threads made it, which checks run
_NOT_SHAPING = ("workers", "decode_threads", "qc", "qc_file", "visual_frames")


def applies(kind: str) -> bool:
    """Whether items of `kind` are converted in their alignment's read."""
    f = formats.of(kind)
    return f is not None and f.one_pass


def fingerprint(settings: IngestSettings) -> str:
    """A digest of every setting that shapes a container (the layout plan's content included,
    not only its path): a staged container is committed only under the same one."""
    shaping = {k: v for k, v in settings.to_dict().items() if k not in _NOT_SHAPING}
    plan = settings.layout_plan
    shaping["plan_content"] = plan.to_dict() if plan is not None else None
    return hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode()).hexdigest()[:32]


def blocked(al: AlignedTracks, raw, kind: str, settings: IngestSettings) -> bool:
    """Whether a blocking pre-conversion check fails on this alignment (then nothing is staged;
    the qc_pre_conversion check records the same outcome from the aligned_tracks row)."""
    sel = settings.qc
    names = sel.checks_for(raw.vendor or "", raw.source or kind)  # as pre_qc asks, from the row
    blocking = (*sel.blocking, *IDENTITY_CHECKS)
    return any(not o.passed and o.check in blocking for o in evaluate_pre(al, "", names, sel.thresholds))


def stage(raw, al: AlignedTracks, settings: IngestSettings, dest: str) -> str:
    """Convert `raw` into the staged container `dest`; the staged conversion row as JSON ("" when
    the conversion failed: the episodes stage then converts it again and records why)."""
    t0 = time.perf_counter()
    try:
        row = convert_into(raw, al, dest, settings)
    except Exception:  # noqa: BLE001 - a failed staging costs only the saved read: convert again
        discard(dest)
        return ""
    row["seconds"] = time.perf_counter() - t0
    row["fingerprint"] = fingerprint(settings)
    return json.dumps(row)


def commit(staged_json: str | None, staged: str, dest: str, shaped: str) -> dict | None:
    """The conversion row of the staged container moved to `dest`, or None (not staged, staged under
    other settings than those `shaped` fingerprints, or gone): then the caller converts. A staged
    container under other settings is removed."""
    if not staged_json:
        return None
    row = json.loads(staged_json)
    if row.pop("fingerprint", "") != shaped:
        discard(staged)
        return None
    opts = StorageLocation.from_env(staged).fsspec_options()
    try:
        objects.move(staged, dest, opts)
    except FileNotFoundError:  # removed meanwhile (a sweep, an operator): convert again
        return None
    row["container_uri"] = dest
    return row


def discard(staged: str) -> None:
    """Remove a staged container (ours, made from the landing item, never the item); gone is fine."""
    with suppress(FileNotFoundError):
        fs = objects.filesystem(staged, StorageLocation.from_env(staged).fsspec_options())
        if fs.exists(staged):
            fs.rm_file(staged)


def clear(folder: str) -> None:
    """Remove what is left in a batch's staged folder once its episodes stage has committed what
    it could (a worker that died after staging left its container there without a row)."""
    opts = StorageLocation.from_env(folder).fsspec_options()
    with suppress(FileNotFoundError):
        fs = objects.filesystem(folder, opts)
        if fs.exists(folder):
            fs.rm(folder, recursive=True)
