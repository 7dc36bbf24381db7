"""robodata.names: the one boundary for names and relative paths read from inputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robodata.errors import RobodataError
from robodata.names import UnsafeNameError, check_name, confine, confine_key, is_safe_name, join_name

HOSTILE = ["", ".", "..", "../x", "a/b", "/abs", "a\x00b", " lead", "tab\tname", ".hidden", "a" * 129, "C:\\x", "é"]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_names_are_refused_naming_source_and_field(bad):
    with pytest.raises(UnsafeNameError) as e:
        check_name(bad, field="episode_id", source="/landing/ep/meta.json")
    assert isinstance(e.value, RobodataError)
    assert "/landing/ep/meta.json" in str(e.value) and "episode_id" in str(e.value)


@pytest.mark.parametrize("good", ["cam_left", "site-a-robot-01-20261130T080000-00000", "observation.images.top", "e1"])
def test_ordinary_names_pass_unchanged(good):
    assert check_name(good, field="f", source="s") == good and is_safe_name(good)


def test_non_strings_are_refused():
    for bad in (None, 3, b"cam", ["a"]):
        with pytest.raises(UnsafeNameError, match="must be a string"):
            check_name(bad, field="stream", source="x.mcap")


@pytest.mark.parametrize("rel", ["../secret", "a/../../b", "/etc/passwd", "s3://other/x", "a//b", "a/./b", "", "x\x00"])
def test_relative_paths_that_could_escape_are_refused(tmp_path, rel):
    with pytest.raises(UnsafeNameError):
        confine(tmp_path, rel, field="data_path", source="info.json")
    with pytest.raises(UnsafeNameError):
        confine_key("s3://bucket/ds", rel, field="data_path", source="info.json")


def test_a_symlink_out_of_the_root_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(UnsafeNameError, match="outside"):
        confine(root, "link/file.parquet", field="data_path", source="info.json")
    assert confine(root, "data/chunk-000/file.parquet", field="f", source="s") == (
        root.resolve() / "data" / "chunk-000" / "file.parquet"
    )


def test_object_store_keys_join_under_the_prefix():
    assert confine_key("s3://b/ds/", "data/x.parquet", field="f", source="s") == "s3://b/ds/data/x.parquet"


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_either_refused_or_a_single_segment_inside_the_root(text):
    root = Path("/srv/robodata/out")
    try:
        name = check_name(text, field="stream", source="fuzz")
    except UnsafeNameError:
        return
    joined = Path(os.path.normpath(root / name))
    assert joined.parent == root and joined.name == text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "..", ".", "", "/", "\\", "c.d", "~"]), max_size=6).map("/".join))
def test_confined_paths_never_leave_the_root(tmp_path_factory, rel):
    root = tmp_path_factory.mktemp("root")
    try:
        got = confine(root, rel, field="path", source="fuzz")
    except UnsafeNameError:
        return
    assert got.is_relative_to(root.resolve())


def test_join_name_checks_then_confines(tmp_path):
    assert join_name(tmp_path, "cam_left", field="stream", source="s") == tmp_path.resolve() / "cam_left"
    with pytest.raises(UnsafeNameError):
        join_name(tmp_path, "a/../../x", field="stream", source="s")


def test_within_and_confine_tree_refuse_links_out_of_the_root(tmp_path):
    from robodata.names import confine_tree, within

    root, outside = tmp_path / "item", tmp_path / "outside"
    (root / "cam").mkdir(parents=True)
    outside.mkdir()
    (root / "cam" / "0.jpg").write_bytes(b"x")
    (root / "cam" / "1.jpg").symlink_to(root / "cam" / "0.jpg")  # a link inside is fine
    assert confine_tree(root, source="item") == root.resolve()
    assert within(root, root / "cam" / "1.jpg", field="frame", source="s") == (root / "cam" / "0.jpg").resolve()
    (root / "cam" / "2.jpg").symlink_to(outside / "secret.jpg")  # dangling too: still refused
    with pytest.raises(UnsafeNameError, match="outside"):
        confine_tree(root, source="item")
    with pytest.raises(UnsafeNameError, match="2.jpg"):
        within(root, root / "cam" / "2.jpg", field="frame", source="s")
    (root / "cam" / "2.jpg").unlink()
    (root / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeNameError, match="sub"):
        confine_tree(root, source="item")
