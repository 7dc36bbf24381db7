"""Every bench runs at --smoke: `python -m bench.<name> --smoke` in a subprocess exits 0 and its last
stdout line is one JSON object with the keys the bench declares (bench.suite: KEYS, dotted for
nested objects; peak_rss_mb when a bench declares none). Benches are discovered from bench/*.py,
so a new one is checked without editing this file. Select with `-k bench_smoke`.

Each smoke's time limit scales with the machine (bench.suite.scaled_timeout: the load per core when
it starts; a fixed limit failed on a loaded machine, and the timeout then leaked servers). The heavy
smokes (HEAVY: a daemon, a webserver and a browser, minutes) are marked `heavy`: `make test` leaves
them out, `make test-heavy` runs them, and CI (.ci/run) runs both.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import suite

# Benches CI does not run, each with why.
NOT_IN_CI = {
    "lerobot_peer": "needs the LeRobot peer venv (~8 GB: lerobot 0.6.1 on Python 3.12 with its own torch) and "
    "FFmpeg's shared libraries, which CI does not build; run it by hand: python -m bench.lerobot_peer --smoke",
}
# Benches whose smoke is a suite of its own (`-m heavy`), each with why.
HEAVY = {
    "dagster_paths": "every Dagster user path with the daemon, webserver and Chromium on a fresh instance: minutes",
}
SMOKE_TIMEOUT_S = 300  # one bench on a quiet machine; they take seconds to a minute on 2 cores
HEAVY_TIMEOUT_S = 900
BENCHES = suite.discover()
CAP = 6.0  # at most this many times the quiet limit, however loaded the machine


def _param(b: suite.Bench):
    marks = [pytest.mark.heavy] if b.name in HEAVY else []
    limit = HEAVY_TIMEOUT_S if b.name in HEAVY else SMOKE_TIMEOUT_S
    return pytest.param(b, id=b.name, marks=[*marks, pytest.mark.timeout(limit * CAP + suite.TERM_GRACE_S + 60)])


def test_bench_smoke_discovery_finds_the_benches_and_their_keys():
    names = {b.name for b in BENCHES}
    core = {"advisor", "container", "curate", "ingest", "loader", "resilience", "scale", "train", "upload"}
    assert core <= names, f"benches missing from discovery: {sorted(core - names)}"
    helpers = {"common", "suite", "loader_data", "curate_catalog", "resilience_training"}
    parts = {"lerobot_peer_ours", "lerobot_peer_side", "lerobot_peer_levers", "robustness_container"}  # of one bench
    assert not names & (helpers | parts)
    for b in BENCHES:
        if b.name in core:
            assert b.declared and "peak_rss_mb" in b.keys, f"bench.{b.name} declares no KEYS with peak_rss_mb"


def test_bench_smoke_harness_reports_what_is_missing(tmp_path: Path):
    (tmp_path / "good.py").write_text(
        'KEYS = ("a", "b.c")\n\ndef main():\n    pass\n\nif __name__ == "__main__":\n    main()\n'
    )
    (tmp_path / "good_helper.py").write_text("KEYS = ('x',)\n")  # no __main__ block: not a bench
    (tmp_path / "bare.py").write_text('if "__main__" == __name__:\n    print("{}")\n')
    (tmp_path / "good_side.py").write_text('PART_OF = "good"\nif __name__ == "__main__":\n    pass\n')  # a part
    (tmp_path / "bad.py").write_text('KEYS = ("a", 1)\nif __name__ == "__main__":\n    pass\n')
    with pytest.raises(ValueError, match="bad.py: KEYS must be"):
        suite.discover(tmp_path)
    (tmp_path / "bad.py").unlink()
    found = {b.name: b for b in suite.discover(tmp_path)}
    assert set(found) == {"good", "bare"}
    assert found["good"].keys == ("a", "b.c") and found["good"].declared
    assert found["bare"].keys == suite.DEFAULT_KEYS and not found["bare"].declared
    assert suite.missing_keys({"a": 1, "b": {"c": 2}}, ("a", "b.c")) == []
    assert suite.missing_keys({"a": 1, "b": 2}, ("a", "b.c", "d")) == ["b.c", "d"]
    assert suite.last_json('log line\n{"a": 1}\n\n') == {"a": 1}
    assert suite.last_json('{"a": 1}\nnot json') is None and suite.last_json("[1]") is None


@pytest.mark.parametrize("bench", [_param(b) for b in BENCHES])
def test_bench_smoke(bench: suite.Bench, tmp_path: Path):
    if bench.name in NOT_IN_CI:
        pytest.skip(NOT_IN_CI[bench.name])
    limit = suite.scaled_timeout(HEAVY_TIMEOUT_S if bench.name in HEAVY else SMOKE_TIMEOUT_S, CAP)
    out = suite.run(bench, "smoke", timeout_s=limit, cwd=tmp_path)  # its .bench/ goes to tmp_path
    if out.rc != 0 and "ServiceUnavailable" in out.stderr and os.environ.get("CI", "").lower() != "true":
        pytest.skip(f"bench.{bench.name} needs a service not installed here:\n{out.stderr[-500:]}")
    assert out.rc == 0, f"bench.{bench.name} --smoke exited {out.rc} after {out.wall_s}s\n{out.tail()}"
    assert out.result is not None, f"bench.{bench.name} --smoke: last stdout line is not a JSON object\n{out.tail()}"
    assert not out.missing, f"bench.{bench.name} --smoke: keys missing from its result: {out.missing}\n{out.result}"
