"""robodata.cluster.patching: every patch failure is a PatchError inside the RobodataError tree."""

from __future__ import annotations

import pytest

from robodata.cluster.patching import PatchError, apply_json_patch
from robodata.errors import RobodataError


@pytest.mark.parametrize(
    ("patch", "code", "names"),
    [
        ([{"op": "test", "path": "/a", "value": 2}], 422, "/a"),
        ([{"op": "remove", "path": "/missing"}], 422, "/missing"),
        ([{"op": "add", "path": "no-slash", "value": 1}], 400, "no-slash"),
        ([{"op": "frobnicate", "path": "/a"}], 400, "frobnicate"),
        ({"op": "add"}, 400, "list"),
    ],
)
def test_patch_failures_are_robodata_errors_naming_the_path(patch, code, names):
    with pytest.raises(RobodataError) as exc:
        apply_json_patch({"a": 1}, patch)
    assert isinstance(exc.value, PatchError) and exc.value.code == code
    assert names in str(exc.value)


@pytest.mark.parametrize(
    "patch",
    [["not an op"], [{"op": "add", "path": "/l/x", "value": 1}], [{"op": "remove", "path": "/l/-1"}]],
)
def test_malformed_operations_are_patch_errors(patch):
    with pytest.raises(PatchError) as exc:
        apply_json_patch({"l": [1, 2]}, patch)
    assert exc.value.code == 400
