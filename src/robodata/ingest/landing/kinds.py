"""What a landing-zone entry no format claims looks like: the reason of its quarantine row.

Every entry of a landing zone becomes an item: one a format claims gets its kind
(robodata.ingest.formats, listed by robodata.ingest.landing.scan), any other becomes an
`unrecognized` item whose reason names what it looks like (from its name, a folder's first
entries, a Git LFS pointer's first line, or the recording folder it is part of), so it lands in
the batch's QC table as a quarantine row and is counted, never dropped in silence.
"""

from __future__ import annotations

import os
from pathlib import Path

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


LFS_MAGIC = b"version https://git-lfs.github.com/spec/"


def lfs_pointer(path: str | Path) -> str:
    """ "" unless the local file is a Git LFS pointer (a checkout without `git lfs pull`): then
    what it points at ("sha256:<oid>, <size> bytes")."""
    p = Path(path)
    try:
        if not p.is_file() or p.is_symlink() or p.stat().st_size > 1024:
            return ""
        text = p.read_bytes()
    except OSError:
        return ""
    if not text.startswith(LFS_MAGIC):
        return ""
    fields = dict(line.split(" ", 1) for line in text.decode(errors="replace").splitlines() if " " in line)
    return f"{fields.get('oid', '?')}, {fields.get('size', '?')} bytes"


def lfs_reason(uri: str, pointers: list[str]) -> str:
    """The reason of an item whose files are Git LFS pointers, not content."""
    shown = ", ".join(pointers[:3]) + (f" (+{len(pointers) - 3} more)" if len(pointers) > 3 else "")
    return (
        f"{uri}: Git LFS pointer file(s), not the recording: {shown}; fetch the content "
        "(`git lfs pull` in the checkout it came from) and land the real files"
    )


def lfs_pointers(path: str | Path, limit: int = 2000) -> list[str]:
    """The Git LFS pointer files of a local item (the file itself, or a folder's first `limit`
    files), as `name (sha256:<oid>, <size> bytes)`."""
    p = Path(path)
    if p.is_symlink():
        return []
    files = [p] if p.is_file() else [f for _, f in zip(range(limit), p.rglob("*"), strict=False)]
    out = []
    for f in files:
        what = lfs_pointer(f)
        if what:
            out.append(f"{f.relative_to(p) if f != p else f.name} ({what})")
    return out


def _part_of(uri: str) -> str:
    """A hint when a local entry lies inside a recording folder a format claims (its `data/`,
    `meta/`, `videos/` given as the landing zone)."""
    from robodata.ingest import formats

    here = Path(uri).parent
    for _ in range(3):
        for marker, fmt in formats.markers():
            if (here / marker).exists():
                return (
                    f"part of the {fmt.label} recording {here}: point ingest at the recording itself or at "
                    f"{here.parent}, the folder holding it"
                )
        if here.parent == here:
            break
        here = here.parent
    return ""


def unrecognized_reason(uri: str) -> str:
    """The quarantine reason of an unrecognized entry (a local folder's entries are listed, a
    remote one is judged by its name)."""
    from robodata.ingest import formats

    name = uri.rstrip("/").rsplit("/", 1)[-1]
    known = f"no importer claims it (known: {formats.labels()})"
    local = "://" not in uri
    if local and (pointer := lfs_pointer(uri)):
        return lfs_reason(uri, [f"{name} ({pointer})"])
    part = _part_of(uri) if local else ""
    if part:
        return f"{uri}: unrecognized landing entry ({part}): {known}"
    if name.startswith("."):
        return (
            f"{uri}: hidden landing entry (dot-prefixed: OS metadata such as .DS_Store, or an editor / "
            f"rsync temporary): not ingested; {known}"
        )
    entries = None
    if local and Path(uri).is_dir() and not Path(uri).is_symlink():
        try:
            entries = sorted(os.listdir(uri))[:1000]
        except OSError:
            entries = []
    what = guess(name, entries)
    return f"{uri}: unrecognized landing entry ({what}): {known}"
