"""Issue 36: unit-aware range checks and QC files (`robodata ingest --qc FILE.yaml`)."""

from __future__ import annotations

import shutil

import pytest
import yaml
from deltalake import DeltaTable
from typer.testing import CliRunner

from bench.realdata_fixtures import MISSING, REAL, present
from robodata.errors import ConfigError
from robodata.ingest.align import StreamTiming
from robodata.ingest.qc import PRE_CHECKS, QCSelection, QCThresholds
from robodata.ingest.qc_file import apply_qc, load_qc_file
from robodata.ingest.settings import IngestSettings


def _timing(vmin: float, vmax: float, units: str) -> StreamTiming:
    return StreamTiming("array", 100, 30.0, 30.0, 0.04, 0, 0.0, 3.3, 0.0, 0.0, 0.0, vmin=vmin, vmax=vmax, units=units)


@pytest.mark.parametrize(
    "units,vmax,in_range,declared",
    [("rad", 7.0, False, True), ("rad", 3.0, True, True), ("", 100.0, True, False), ("", 400.0, True, False)],
)
def test_the_range_is_checked_where_radians_are_declared_and_reported_where_nothing_is(units, vmax, in_range, declared):
    """SO-100 positions (+-100) and PushT's pixels (0..512) declare no units: not range-checked (they
    were quarantined as out of +-2 pi), and `units_declared` says so without blocking."""
    from types import SimpleNamespace

    al = SimpleNamespace(timing={"joint_pos": _timing(-vmax, vmax, units)}, issues=[])
    ok, why = PRE_CHECKS["joints_in_range"](al, QCThresholds())
    assert ok == in_range and ("rad exceeds" in why) == (not in_range)
    ok, why = PRE_CHECKS["units_declared"](al, QCThresholds())
    assert ok == declared and ("units not declared" in why) == (not declared)
    assert "units_declared" not in QCSelection().blocking and "joints_in_range" in QCSelection().blocking


def test_a_qc_file_sets_each_checks_run_blocking_and_thresholds():
    doc = {
        "checks": {
            "joints_in_range": {"blocking": False, "joint_abs_max": 3.5},
            "rate_within_tolerance": {"rate_tolerance": 0.25},
            "units_declared": {"blocking": True},
            "topics_known": {"run": False},
        },
        "by_source": {"rlds": ["readable", "converted"]},
    }
    sel = apply_qc(doc, QCSelection(), "qc.yaml")
    assert "joints_in_range" not in sel.blocking and "units_declared" in sel.blocking
    assert sel.thresholds.joint_abs_max == 3.5 and sel.thresholds.rate_tolerance == 0.25
    assert "topics_known" not in sel.checks and sel.by_source == {"rlds": ("readable", "converted")}
    assert sel.thresholds.max_gap_periods == QCThresholds().max_gap_periods  # what the file leaves alone
    assert apply_qc(doc, sel, "again") == sel  # applying it twice (workers rebuild settings) changes nothing


@pytest.mark.parametrize(
    "doc,match",
    [
        ({"checks": {"joint_range": {}}}, r"checks\.joint_range: unknown check"),
        ({"checks": {"joints_in_range": {"rate_tolerance": 0.2}}}, r"unknown key 'rate_tolerance'.*joint_abs_max"),
        ({"checks": {"readable": {"blocking": False}}}, "readable always runs and always quarantines"),
        ({"checks": {"joints_in_range": {"run": "no"}}}, r"joints_in_range\.run: expected true or false"),
        ({"checks": {"joints_in_range": {"joint_abs_max": "big"}}}, "expected a number"),
        ({"checks": {"joints_in_range": {"joint_abs_max": -1}}}, "must be > 0"),
        ({"check": {}}, r"unknown key\(s\) \['check'\]"),
        ({"by_source": {"rlds": ["no_such_check"]}}, "unknown check"),
    ],
)
def test_a_wrong_qc_file_is_refused_naming_the_file_and_key(doc, match, tmp_path):
    path = tmp_path / "qc.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=match) as err:
        IngestSettings(qc_file=str(path))
    assert str(path) in str(err.value)
    with pytest.raises(ConfigError, match="unreadable"):
        load_qc_file(str(tmp_path / "missing.yaml"))


@pytest.mark.skipif(not present("zarr_pusht_dp/pusht_cchi_v7_replay.zarr"), reason=MISSING)
def test_ingest_qc_makes_undeclared_units_blocking(tmp_path):
    """The same PushT episodes pass by default (a finding) and are quarantined under a QC file that
    makes `units_declared` blocking; the worker settings carry the file's selection."""
    from robodata.cli import app

    land = tmp_path / "landing"
    shutil.copytree(REAL / "zarr_pusht_dp" / "pusht_cchi_v7_replay.zarr", land / "pusht.zarr")
    qc = tmp_path / "qc.yaml"
    qc.write_text(yaml.safe_dump({"checks": {"units_declared": {"blocking": True}}}))
    s = IngestSettings(qc_file=str(qc))
    assert IngestSettings.from_dict(s.to_dict()).qc == s.qc
    args = ["ingest", str(land), "--root", str(tmp_path / "s"), "--qc", str(qc), "-q", "--allow-none"]
    res = CliRunner().invoke(app, args)  # all quarantined: exit 0 only with --allow-none
    assert res.exit_code == 0, res.output
    qc_rows = DeltaTable(str(tmp_path / "s" / "ingest" / "qc_results")).to_pyarrow_table().to_pylist()
    units = [r for r in qc_rows if r["check"] == "units_declared"]
    assert len(units) == 3 and all(r["blocking"] and not r["passed"] for r in units)
    assert all(not r["passed"] for r in qc_rows if r["stage"] == "summary")
