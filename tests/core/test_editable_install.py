"""The installed robodata is src/ itself (make venv: only robodata_dagster goes through the strict
editable link tree), so a traceback from a core function shows a path under src/."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def test_a_core_traceback_lands_in_src():
    from robodata.names import UnsafeNameError, check_name

    with pytest.raises(UnsafeNameError) as info:
        check_name("../x", field="f", source="s")
    frames = traceback.extract_tb(info.value.__traceback__)
    assert Path(frames[-1].filename) == SRC / "robodata" / "names.py"


@pytest.mark.parametrize("module", ["robodata", "robodata.storage.state", "robodata_testing"])
def test_core_modules_are_imported_from_src(module):
    import importlib

    path = Path(importlib.import_module(module).__file__ or "")
    assert path.is_relative_to(SRC) and not path.is_symlink(), path


def test_the_mapped_folders_are_reachable_by_their_installed_names():
    import robodata_dagster.assets
    import robodata_dagster.resources.ingest

    repo = SRC.parent
    assert Path(robodata_dagster.resources.ingest.__file__ or "").resolve() == repo / "resources" / "ingest.py"
    assert Path(robodata_dagster.assets.__path__[0]).name == "assets"
