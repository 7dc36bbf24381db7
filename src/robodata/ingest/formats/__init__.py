"""The formats robodata ingests: one registry entry per format (modelled on mosaicml/streaming's
`format/__init__.py` `_readers`). The landing scan, dedup, the importer dispatch and
`robodata synth` ask this registry; no other module spells a format's kind.

A Format says
  kind        the landing item kind (LandingItem.kind, the batch tables' `kind`, the catalog's
              `source_format`); a versioned format's items are `<kind>-<version>` (`lerobot-v3.0`)
  label       how reasons name it
  suffixes    a file entry whose name ends in one of these is claimed
  markers     a folder entry holding one of these (a path inside it) is claimed. A marker is the
              format's completion marker: written last, its modification time is the item's
              completion time (the landing cursor and settle logic go by it)
  whole       a file format's completion check on the file's bytes (formats.whole: an MCAP file's
              footer magic, an HDF5 file's end-of-file address); None: whole once settled
  probe       a local folder claimed by looking inside it (RLDS: dataset_info.json here or in a
              version folder); remote folders are not probed
  fragments   its items are `<base>#<episode>`: one item per episode of a file / folder
  lister      expands one claimed entry into its items (formats.listers); None: the entry is one item
  unread      the fragment an entry gets when it is listed but never read (a symlink out of the
              landing zone: quarantined by its importer)
  opener      (local uri, OpenContext) -> RawEpisode (formats.openers)
  stage_first a remote item stages only these subfolders, then `stage_rest` stages what one
              episode reads (LeRobot: meta/, then the episode's files); None: the whole item
  synth       `robodata synth --format` names writing it -> writer (robodata.ingest.synth.writers)
  one_pass    its alignment reads the recording whole (stamps sit beside the payload, in the same
              compressed chunk, record or step), so its conversion runs in that read
              (robodata.ingest.steps.one_pass)

Importers take their kind from the leaf the entries are built on (robodata.ingest.format_kinds:
`format_kinds.HDF5`, `format_kinds.versioned(format_kinds.LEROBOT, "v3.0")`), never from this registry,
which dispatches to them.

Checked in this order: files by suffix, folders by marker (the first marker found wins), then
probes. Any other entry is UNRECOGNIZED (robodata.ingest.landing.kinds gives its reason).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from robodata.ingest import format_kinds as kinds
from robodata.ingest.formats import listers, openers, whole
from robodata.ingest.formats.listers import Entry
from robodata.ingest.formats.openers import OpenContext
from robodata.ingest.landing.item import LandingItem

UNRECOGNIZED = kinds.UNRECOGNIZED  # the kind of a landing entry no format claims


@dataclass(frozen=True)
class Format:
    kind: str
    label: str
    opener: Callable[[str, OpenContext], Any]
    suffixes: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    whole: Callable[[BinaryIO, int], bool] | None = None
    probe: Callable[[str], bool] | None = None
    fragments: bool = False
    lister: Callable[[Entry], Iterator[LandingItem]] | None = None
    unread: str = ""
    stage_first: tuple[str, ...] | None = None
    stage_rest: Callable[[str, str, str, dict], None] | None = None
    synth: dict[str, str] = field(default_factory=dict)  # synth name -> writer in synth.writers
    one_pass: bool = False

    def versioned(self, version: str) -> str:
        """The kind of an item of this format at `version` (`lerobot-v3.0`)."""
        return kinds.versioned(self.kind, version)

    def holds(self, kind: str) -> bool:
        """Whether `kind` (an item's kind, `lerobot-v2.1` included) is this format's."""
        return kind == self.kind or kind.startswith(self.kind + "-v")

    def split(self, uri: str) -> tuple[str, str, str]:
        """(base, "#" or "", episode) of an item uri: fragments split at the first `#`."""
        return uri.partition("#") if self.fragments else (uri, "", "")


MCAP = Format(
    kinds.MCAP, "MCAP", openers.bag, suffixes=(".mcap",), whole=whole.mcap, synth={"mcap": "mcap"}, one_pass=True
)
ROS1_BAG = Format(
    kinds.ROS1_BAG, "ROS 1 .bag", openers.bag, suffixes=(".bag",), synth={"ros1-bag": "ros1_bag"}, one_pass=True
)
HDF5 = Format(
    kinds.HDF5,
    "HDF5 (ALOHA, robomimic)",
    openers.hdf5,
    suffixes=(".hdf5", ".h5"),
    whole=whole.hdf5,
    fragments=True,
    lister=listers.hdf5,
    synth={"hdf5-aloha": "hdf5_aloha", "hdf5-robomimic": "hdf5_robomimic"},
)
LEGACY_JPEG = Format(
    kinds.LEGACY_JPEG, "legacy JPEG folders", openers.legacy, markers=("_COMPLETE",), synth={"jpeg": "jpeg"}
)
ROS2_BAG = Format(
    kinds.ROS2_BAG,
    "ROS 2 bag folders",
    openers.bag,
    markers=("metadata.yaml",),
    synth={"ros2-bag-custom": "ros2_bag_custom"},
    one_pass=True,
)
LEROBOT = Format(
    kinds.LEROBOT,
    "LeRobot",
    openers.lerobot,
    markers=("meta/info.json",),
    fragments=True,
    lister=listers.lerobot,
    unread="#0",
    stage_first=("meta",),
    stage_rest=openers.lerobot_episode_files,
    synth={"lerobot-v2.1": "lerobot_v21", "lerobot-v3.0": "lerobot_v30"},
    one_pass=True,
)
ZARR = Format(
    kinds.ZARR,
    "Zarr replay buffers",
    openers.zarr,
    # Zarr v2 (diffusion_policy / UMI) and v3 stores
    markers=("meta/episode_ends/.zarray", "meta/episode_ends/zarr.json"),
    fragments=True,
    lister=listers.zarr,
    synth={"zarr": "zarr"},
)
RLDS = Format(
    kinds.RLDS,
    "RLDS/TFDS folders",
    openers.rlds,
    probe=listers.is_tfds,
    fragments=True,
    lister=listers.rlds,
    synth={"rlds": "rlds"},
    one_pass=True,
)
FORMATS: tuple[Format, ...] = (MCAP, ROS1_BAG, HDF5, LEGACY_JPEG, ROS2_BAG, LEROBOT, ZARR, RLDS)
# the formats whose layout a key map declares (robodata.ingest.importers.keymap: step arrays, no topics)
KEY_MAPPED: tuple[Format, ...] = tuple(f for f in FORMATS if f.kind in kinds.KEY_MAPPED)
_BY_KIND = {f.kind: f for f in FORMATS}


def of(kind: str) -> Format | None:
    """The format of an item kind (`lerobot-v3.0` is LeRobot's), None for UNRECOGNIZED or unknown."""
    hit = _BY_KIND.get(kind)
    if hit is not None:
        return hit
    return next((f for f in FORMATS if f.holds(kind)), None)


def for_file(name: str) -> Format | None:
    suffix = os.path.splitext(name)[1].lower()
    return next((f for f in FORMATS if suffix in f.suffixes), None)


def claim_local(path: str | os.PathLike[str]) -> Format | None:
    """The format claiming a local entry (a file by suffix, a folder by marker or probe), or None."""
    p = os.fspath(path)
    if not os.path.isdir(p):
        return for_file(p)
    hit = next((f for m, f in markers() if os.path.exists(os.path.join(p, m))), None)
    return hit or next((f for f in probes() if f.probe is not None and f.probe(p)), None)


def markers() -> list[tuple[str, Format]]:
    """(marker, format) in the order folders are checked."""
    return [(m, f) for f in FORMATS for m in f.markers]


def probes() -> list[Format]:
    return [f for f in FORMATS if f.probe is not None]


def labels() -> str:
    return ", ".join(f.label for f in FORMATS)


def synth_names() -> tuple[str, ...]:
    return tuple(name for f in FORMATS for name in f.synth)


def synth_writer_name(name: str) -> str:
    """The function of robodata.ingest.synth.writers that `robodata synth --format name` calls."""
    for f in FORMATS:
        if name in f.synth:
            return f.synth[name]
    raise KeyError(name)


__all__ = [
    "FORMATS",
    "HDF5",
    "KEY_MAPPED",
    "LEGACY_JPEG",
    "LEROBOT",
    "MCAP",
    "RLDS",
    "ROS1_BAG",
    "ROS2_BAG",
    "UNRECOGNIZED",
    "ZARR",
    "Entry",
    "Format",
    "OpenContext",
    "claim_local",
    "for_file",
    "of",
    "markers",
    "probes",
]
