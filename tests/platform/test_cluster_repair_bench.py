"""bench.resilience: every registered fault survives, nothing lost, the result line is JSON."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import resilience

ROOT = Path(__file__).resolve().parents[2]


def test_all_faults_survive_in_process():
    result = resilience.run_all(quick=True)
    assert result["faults_tried"] >= 6
    assert result["faults_survived"] == result["faults_tried"], result["failed"]
    assert result["data_lost"] == 0


def test_a_fault_that_is_not_survived_is_counted(monkeypatch):
    broken = resilience.Fault("always_fails", "test", lambda tmp, quick: resilience.FaultResult(False, 2, "x"))
    monkeypatch.setattr(resilience, "FAULTS", [*resilience.FAULTS, broken])
    result = resilience.run_all(quick=True, only=["always_fails", "volatile_ecc_errors"])
    assert (result["faults_tried"], result["faults_survived"], result["data_lost"]) == (2, 1, 2)
    assert result["failed"] == ["always_fails"]
    with pytest.raises(ValueError):
        resilience.register(resilience.FAULTS[0])


def test_cli_last_line_is_the_result():
    out = subprocess.run([sys.executable, "-m", "bench.resilience", "--quick"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"faults_tried", "faults_survived", "data_lost", "peak_rss_mb"} <= set(last)
