"""What a landing-zone entry is: the kind an importer claims, or a guess for one no importer claims.

Every entry of a landing zone becomes an item: one an importer claims gets its kind
(robodata.ingest.landing.scan), any other becomes an `unrecognized` item whose reason names
what it looks like (from its name, or a folder's first entries), so it lands in the batch's
QC table as a quarantine row and is counted, never dropped in silence.
"""

from __future__ import annotations

import os
from pathlib import Path

# file suffix -> the importer kind that claims it
FILE_KINDS = {".mcap": "mcap", ".bag": "ros1-bag", ".hdf5": "hdf5", ".h5": "hdf5"}

# name suffix -> what it probably is (for the reason of an unrecognized entry)
GUESSES = {
    ".ulg": "PX4 log (ULog)",
    ".tlog": "MAVLink telemetry log",
    ".bin": "binary log (ArduPilot dataflash?)",
    ".db3": "ROS 2 bag storage file without its folder's metadata.yaml",
    ".tfrecord": "TFRecord shard outside an RLDS/TFDS dataset folder",
    ".zarr": "Zarr store without meta/episode_ends",
    ".svo": "ZED SVO recording",
    ".svo2": "ZED SVO recording",
    ".mp4": "video file",
    ".mkv": "video file",
    ".avi": "video file",
    ".jpg": "single image",
    ".png": "single image",
    ".csv": "CSV table",
    ".parquet": "parquet table",
    ".json": "JSON document",
    ".yaml": "YAML document",
    ".zip": "archive (unpack it into the landing zone)",
    ".tar": "archive (unpack it into the landing zone)",
    ".gz": "compressed file (unpack it into the landing zone)",
    ".txt": "text file",
}
# a folder's entries -> what the folder probably is
FOLDER_GUESSES = (
    ("mav0", "EuRoC dataset folder"),
    ("metadata.yaml", "ROS 2 bag folder"),
    ("_COMPLETE", "legacy JPEG episode"),
    ("dataset_info.json", "TFDS dataset folder without TFRecord shards"),
    ("zarr.json", "Zarr store without meta/episode_ends"),
    (".zgroup", "Zarr store without meta/episode_ends"),
)


def file_kind(name: str) -> str:
    """The importer kind a file entry is claimed by, or "unrecognized"."""
    return FILE_KINDS.get(os.path.splitext(name)[1].lower(), "unrecognized")


def guess(name: str, entries: list[str] | None = None) -> str:
    """What an unclaimed entry looks like: from a folder's entries, else from the name's suffix."""
    for child, what in FOLDER_GUESSES:
        if entries is not None and child in entries:
            return what
    suffix = os.path.splitext(name)[1].lower()
    if suffix in GUESSES:
        return f"{suffix} -> {GUESSES[suffix]}"
    if entries is not None:
        if any(e.endswith(".db3") or e.endswith(".mcap") for e in entries):
            return "ROS 2 bag folder without metadata.yaml (still being written?)"
        return (
            "folder with no completion marker "
            "(_COMPLETE, metadata.yaml, meta/info.json, dataset_info.json, meta/episode_ends)"
        )
    return f"file of unknown type {suffix or '(no suffix)'}"


def unrecognized_reason(uri: str) -> str:
    """The quarantine reason of an unrecognized entry (a local folder's entries are listed, a
    remote one is judged by its name)."""
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    entries = None
    if "://" not in uri and Path(uri).is_dir() and not Path(uri).is_symlink():
        try:
            entries = sorted(os.listdir(uri))[:1000]
        except OSError:
            entries = []
    what = guess(name, entries)
    return (
        f"{uri}: unrecognized landing entry ({what}): no importer claims it "
        "(known: MCAP, ROS 1 .bag, ROS 2 bag folders, legacy JPEG folders, LeRobot, HDF5, "
        "Zarr replay buffers, RLDS/TFDS folders)"
    )
