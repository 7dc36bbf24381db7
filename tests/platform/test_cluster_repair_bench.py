"""bench.resilience: every registered fault survives, nothing lost, the result line is JSON."""

import json
import sys

import pytest

from bench import resilience


def test_a_fault_that_is_not_survived_is_counted(monkeypatch):
    broken = resilience.Fault("always_fails", "test", lambda tmp, quick: resilience.FaultResult(False, 2, "x"))
    monkeypatch.setattr(resilience, "FAULTS", [*resilience.FAULTS, broken])
    result = resilience.run_all(quick=True, only=["always_fails", "volatile_ecc_errors"])
    assert (result["faults_tried"], result["faults_survived"], result["data_lost"]) == (2, 1, 2)
    assert result["failed"] == ["always_fails"]
    with pytest.raises(ValueError):
        resilience.register(resilience.FAULTS[0])


def test_main_last_line_is_the_result(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["bench.resilience", "--quick"])
    resilience.main()
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"faults_tried", "faults_survived", "data_lost", "peak_rss_mb"} <= set(last)
    assert last["faults_survived"] == last["faults_tried"] >= 6 and last["data_lost"] == 0
