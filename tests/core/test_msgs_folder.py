"""Issue 44 items 4 and 9: the `--msgs` folder is confined like a landing root, its errors never echo
a file's contents, and a folder redefining a standard ROS type is refused once, up front, as a
ConfigError (not per bag); a verbatim copy of a standard type is no redefinition."""

from __future__ import annotations

import pytest

from bench.robustness_msgs import HUMBLE_HEADER, MARK, SECRET, _cases, _put
from robodata.errors import ConfigError
from robodata.ingest.importers.msgdefs import load_msgdefs
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth.ros import write_vendor_msgs


@pytest.fixture
def folders(tmp_path):
    outside = tmp_path / "outside"
    _put(outside, "passwd", SECRET)
    _put(outside, "pkg/msg/Pos.msg", SECRET)
    return tmp_path, _cases(outside)


def _hostile(folders, name: str) -> str:
    root, cases = folders
    d = write_vendor_msgs(root / name)
    cases[name](d)
    with pytest.raises(ConfigError) as info:
        IngestSettings(msgs=str(d))
    return str(info.value)


@pytest.mark.parametrize("name", ["msg_link_outside", "package_link_outside"])
def test_a_link_out_of_the_msgs_folder_is_refused_naming_the_link(folders, name):
    why = _hostile(folders, name)
    assert "evil" in why and "outside" in why and MARK not in why


@pytest.mark.parametrize("name", ["msg_is_passwd", "idl_is_passwd", "msg_not_utf8", "msg_2mb"])
def test_an_error_names_the_file_never_its_contents(folders, name):
    why = _hostile(folders, name)
    assert "evil/msg/Pos." in why and MARK not in why and "root:x" not in why


def test_a_msg_parse_error_names_the_line(folders):
    assert "at line 1)" in _hostile(folders, "msg_is_passwd")


@pytest.mark.parametrize("name", ["redefines_header", "redefines_joint_state"])
def test_redefining_a_standard_type_is_one_config_error(folders, name):
    assert "a standard type of ROS 1 Noetic and ROS 2 Humble, differently" in _hostile(folders, name)


def test_a_verbatim_copy_of_a_standard_type_is_dropped_not_a_candidate(tmp_path):
    d = write_vendor_msgs(tmp_path / "msgs")
    _put(d, "std_msgs/msg/Header.msg", HUMBLE_HEADER)
    defs = load_msgdefs(str(d))
    assert "std_msgs/msg/Header" not in defs.candidates and "robodata_vendor/msg/ArmState" in defs.candidates
