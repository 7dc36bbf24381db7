"""Hostile recordings for the HDF5, Zarr, RLDS and bag importers (issue 43): what an importer read
is what the source declares (no silent fills, no concealed frames, no lies taken), nothing is read
through a link out of the item, and a small input cannot buy unbounded work. Each case is built by
bench/robustness_importers_hostile_cases.py (the bench runs ~120 of them)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.robustness_importers_hostile_bags import bag_cases, rlds_cases
from bench.robustness_importers_hostile_cases import cut, episode, hdf5_cases, zarr_cases
from robodata.codecs.image import ImageError, decode_jpeg_bytes
from robodata.errors import ConfigError, RobodataError
from robodata.ingest.importers import ImportOptions, staged_raw
from robodata.ingest.importers.bounds import WorkBounds
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth.arrays import write_zarr


def _read(entry: Path, options: ImportOptions | None = None) -> int:
    """Open every item of a landing entry and pull all its frames (as a conversion does)."""
    n = 0
    items = [i for i in new_items(str(entry.parent), LandingCursor()) if Path(i.uri.partition("#")[0]) == entry]
    assert items, entry
    for item in items:
        with staged_raw(item.uri, item.kind, None, 0, options or ImportOptions()) as raw:
            assert raw.frames is not None
            n += sum(1 for _ in raw.frames())
    return n


def _refused(entry: Path, *phrases: str, options: ImportOptions | None = None) -> str:
    with pytest.raises(RobodataError) as exc:
        _read(entry, options)
    for p in phrases:
        assert p in str(exc.value), str(exc.value)
    return str(exc.value)


def _build(tmp_path: Path, builder, name: str, *extra) -> Path:
    case = builder(tmp_path / "land", tmp_path / "outside", *extra, lambda n: n == name)[0]
    return tmp_path / "land" / case.fmt / case.name


# --- silent fills --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, phrase",
    [
        ("missing_wrist_rgb_middle", "data/wrist_rgb chunk 4.0.0.0 is missing"),
        ("missing_state", "data/state chunk 0.0 is missing"),
    ],
)
def test_zarr_missing_chunk_is_refused_naming_array_and_chunk(tmp_path, name, phrase):
    """zarr returns the fill value for a deleted chunk (black frames, zero state): refused instead."""
    _refused(_build(tmp_path, zarr_cases, name), phrase, "fill value")


# --- concealed frames ----------------------------------------------------------------------


def _jpeg(mode: str = "RGB", **kw) -> bytes:
    rgb = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).convert(mode).save(buf, "JPEG", quality=90, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("frac", [0.2, 0.5, 0.75])
@pytest.mark.parametrize("mode, kw", [("RGB", {}), ("L", {}), ("RGB", {"progressive": True}), ("CMYK", {})])
def test_cut_jpeg_with_its_end_marker_is_refused_not_concealed(frac, mode, kw):
    good = _jpeg(mode, **kw)
    decode_jpeg_bytes(good)  # whole: decodes
    decode_jpeg_bytes(good + b"\0" * 40)  # a zero-padded row (ALOHA without compress_len): decodes
    with pytest.raises(ImageError, match="JPEG"):
        decode_jpeg_bytes(cut(frac)(good))
    with pytest.raises(ImageError, match="end marker"):
        decode_jpeg_bytes(cut(frac, keep_end=False)(good))


def test_hdf5_cut_jpeg_frame_is_refused(tmp_path):
    _refused(_build(tmp_path, hdf5_cases, "jpeg_cut50_f3"), "frame 3", "corrupt JPEG")


def test_bag_cut_jpeg_frame_is_refused(tmp_path):
    _refused(_build(tmp_path, bag_cases, "jpeg_cut35_f0", tmp_path / "msgs"), "corrupt JPEG")


# --- reads outside the root ----------------------------------------------------------------


def test_rlds_features_json_linked_outside_is_refused(tmp_path):
    msg = _refused(_build(tmp_path, rlds_cases, "link_features"), "features.json", "outside")
    assert "symlink" in msg


@pytest.mark.parametrize("name", ["link_camera_dir", "link_chunk", "link_zarray"])
def test_zarr_links_outside_the_store_are_refused(tmp_path, name):
    _refused(_build(tmp_path, zarr_cases, name), "link in the Zarr store", "outside")


@pytest.mark.parametrize(
    "name, phrase",
    [
        ("extlink_camera", "external link"),
        ("extlink_demo", "data/demo_1 is an external link"),
        ("external_storage", "external files"),
        ("virtual_dataset", "virtual dataset"),
    ],
)
def test_hdf5_external_links_storage_and_virtual_datasets_are_refused(tmp_path, name, phrase):
    _refused(_build(tmp_path, hdf5_cases, name), phrase, "refused")


# --- lies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ends_float", "ends_fraction"])
def test_zarr_episode_ends_must_be_integers(tmp_path, name):
    _refused(_build(tmp_path, zarr_cases, name), "meta/episode_ends", "expected integer")


@pytest.mark.parametrize("name", ["compress_len_negative", "compress_len_huge", "compress_len_long"])
def test_hdf5_compress_len_must_be_the_bytes_read(tmp_path, name):
    _refused(_build(tmp_path, hdf5_cases, name), "compress_len")


# --- unbounded work ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sparse_frames", "sparse_state"])
def test_small_hdf5_declaring_huge_datasets_is_refused_before_reading(tmp_path, name):
    entry = _build(tmp_path, hdf5_cases, name)
    t0 = time.process_time()
    _refused(entry, "work bound", "IngestSettings.bounds")
    assert time.process_time() - t0 < 5


def test_jpeg_header_over_the_side_limit_is_refused_before_decoding(tmp_path):
    _refused(_build(tmp_path, rlds_cases, "jpeg_sof_60000_f0"), "over 16384 a side")


def test_cpu_bound_stops_a_conversion_and_names_the_bound(tmp_path):
    entry = write_zarr([episode()], tmp_path, name="good")
    assert _read(entry) > 0  # within the default bounds
    tight = ImportOptions(bounds=WorkBounds(cpu_s_per_input_mb=1e-9, cpu_floor_s=1e-9))
    _refused(entry, "CPU seconds", "bounds.cpu_s_per_input_mb", options=tight)
    small = ImportOptions(bounds=WorkBounds(decoded_per_input_byte=1e-6, decoded_floor_mb=1e-6))
    _refused(entry, "work bound", "bounds.decoded_per_input_byte", options=small)


def test_bounds_are_ingest_settings():
    s = IngestSettings.from_dict({"bounds": {"decoded_per_input_byte": 100.0, "cpu_floor_s": 5.0}})
    assert s.import_options.bounds == WorkBounds(decoded_per_input_byte=100.0, cpu_floor_s=5.0)
    with pytest.raises(ConfigError, match="cpu_floor_s"):
        IngestSettings.from_dict({"bounds": {"cpu_floor_s": 0}})
