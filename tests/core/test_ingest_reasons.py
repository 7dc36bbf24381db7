"""Issue 44 items 1, 2 and 9 (Zarr): step-array recordings whose declarations lie are refused, and
every damaged one is quarantined with a reason naming the file and the field, never a library's bare
exception (MemoryError, OverflowError, RecursionError, blosc's RuntimeError, h5py's OSError,
`<_io.BytesIO object at 0x...>`), including the errors lazy camera readers raise at conversion."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.robustness_reasons import bare
from robodata.ingest.importers import open_raw
from robodata.ingest.raw import RawEpisodeError
from tests.core.helpers_reasons import CASES, write_case


def _uri(tmp_path: Path, name: str) -> tuple[str, str]:
    """The importer uri and kind of a case's landing item (an RLDS item's name leaves out the offset)."""
    family = CASES[name][0]
    base, _, frag = write_case(tmp_path, name).item.partition("#")
    if family == "rlds":
        return f"{tmp_path / base}#{frag}:0", "rlds"
    if family == "zarr":
        return f"{tmp_path / base}#{int(frag)}", "zarr"
    return str(tmp_path / base), "hdf5"


def _refused(tmp_path: Path, name: str) -> str:
    """The reason a case is refused with, opened and its frames read as conversion reads them."""
    uri, kind = _uri(tmp_path, name)
    with pytest.raises(RawEpisodeError) as info:
        for _ in open_raw(uri, kind).frames():
            pass
    reason = str(info.value)
    (tmp_path / "names").mkdir()
    expect = write_case(tmp_path / "names", name).expect  # the same names under another folder
    assert all(e in reason for e in expect), (expect, reason)
    assert not bare(reason), reason
    return reason


@pytest.mark.parametrize("name", ["rlds_action_6_of_7", "rlds_state_8_of_7", "rlds_reward_scalar_twice"])
def test_rlds_step_values_must_match_the_tensor_shape_features_json_declares(tmp_path, name):
    reason = _refused(tmp_path, name)
    assert "declares shape" in reason and "a step" in reason


def test_tensor_shapes_are_read_as_tfds_writes_them_scalars_included():
    from robodata.ingest.importers.tfds_features import tensor_shapes

    step = {"featuresDict": {"features": {
        "action": {"tensor": {"shape": {"dimensions": ["7"]}, "dtype": "float32", "encoding": "none"}},
        "is_last": {"tensor": {"shape": {}, "dtype": "bool", "encoding": "none"}},
        "depth": {"tensor": {"shape": {"dimensions": ["-1", "4"]}, "encoding": "none"}},
        "blob": {"tensor": {"shape": {"dimensions": ["3"]}, "encoding": "zlib"}},
    }}}  # fmt: skip
    doc = {"featuresDict": {"features": {"steps": {"sequence": {"feature": step}}}}}
    assert tensor_shapes(doc) == {"steps/action": (7,), "steps/is_last": (), "steps/depth": (None, 4)}


@pytest.mark.parametrize(
    "name", ["rlds_is_last_twice_before", "rlds_is_last_twice_after", "rlds_is_first_twice", "rlds_action_twice"]
)
def test_a_record_holding_a_feature_twice_is_refused(tmp_path, name):
    """A protobuf map keeps the last of two entries: `is_last` given twice passed as one 10-step episode."""
    assert "appears twice in the record" in _refused(tmp_path, name)


@pytest.mark.parametrize("name", ["rlds_length_2e40", "rlds_length_2e64"])
def test_a_tfrecord_length_field_is_checked_against_the_shard_before_reading(tmp_path, name):
    assert "length field declares" in _refused(tmp_path, name)  # was MemoryError / OverflowError


def test_a_features_json_nested_too_deeply_is_refused_naming_it(tmp_path):
    assert "nested too deeply" in _refused(tmp_path, "rlds_features_nested")  # was RecursionError


@pytest.mark.parametrize(
    "name",
    [
        "rlds_jpeg_garbage_step_0",
        "rlds_jpeg_garbage_step_3",
        "rlds_png_cut_step_5",
        "aloha_jpeg_garbage_frame_4",
        "zarr_camera_chunk_garbage",
        "aloha_image_chunk_garbage",
    ],
)
def test_camera_bytes_that_do_not_decode_name_the_frame_not_a_bytesio(tmp_path, name):
    """Lazy readers run at conversion, outside the importer's guard: their errors are named there."""
    reason = _refused(tmp_path, name)
    assert "object at 0x" not in reason and "_io." not in reason


@pytest.mark.parametrize("name", ["zarr_state_chunk_garbage", "zarr_action_chunk_garbage", "aloha_qpos_chunk_garbage"])
def test_a_damaged_array_chunk_names_the_array(tmp_path, name):
    _refused(tmp_path, name)  # was RuntimeError (blosc) / an HDF5 reason without the key


def test_a_rate_too_large_for_a_float_is_not_a_rate(tmp_path):
    reason = _refused(tmp_path, "zarr_fps_10e400")  # was OverflowError
    assert "not a control rate" in reason and len(reason) < 400


def test_zarr_steps_past_the_last_episode_end_are_a_row_of_their_own(tmp_path):
    from robodata.ingest.landing.scan import LandingCursor, new_items

    land = tmp_path / "land"
    land.mkdir()
    write_case(land, "zarr_ends_short_by_3")
    items = sorted(i.name for i in new_items(str(land), LandingCursor()))
    assert items == ["zarr_ends_short_by_3.zarr#000000", "zarr_ends_short_by_3.zarr#000001"]
    store = land / "zarr_ends_short_by_3.zarr"
    assert len(open_raw(f"{store}#0", "zarr").arrays["joint_pos"].values) == 7
    with pytest.raises(RawEpisodeError, match=r"holds 10 steps, meta/episode_ends ends at 7: steps 7 to 9 belong"):
        open_raw(f"{store}#1", "zarr")
    with pytest.raises(RawEpisodeError, match="no episode 2"):
        open_raw(f"{store}#2", "zarr")


def test_describe_never_gives_an_empty_or_object_repr_detail():
    from robodata.ingest.raw import describe

    assert describe(MemoryError()) == (
        "MemoryError: needs more memory than this process may use (a size the data does not hold?)"
    )
    assert describe(OSError("cannot identify image file <_io.BytesIO object at 0x7f00aa>")) == (
        "OSError: cannot identify image file"
    )
    assert len(describe(ValueError("x" * 10_000))) < 230
    assert describe(RecursionError()) == "RecursionError: nested too deeply to read"


def test_an_image_no_decoder_identifies_is_refused_without_the_bytesio_repr():
    """Every importer decodes through decode_jpeg_bytes (MCAP / bag CompressedImage, JPEG folders)."""
    from robodata.codecs.image import ImageError, decode_jpeg_bytes

    with pytest.raises(ImageError) as info:
        decode_jpeg_bytes(b"\x00garbage, not an image")
    assert "cannot identify image file" in str(info.value) and "object at 0x" not in str(info.value)
