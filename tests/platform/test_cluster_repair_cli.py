"""`robodata health repair` against the loopback API server: dry-run default, --apply, state file."""

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from robodata.cli import app
from robodata.cluster.audit import read_audit
from robodata_testing.fake_apiserver import FakeApiServer

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
RECORDED_NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the fixtures' "now"


def test_repair_cli_dry_run_then_apply(tmp_path):
    audit, state = str(tmp_path / "audit"), tmp_path / "state.json"
    with FakeApiServer.from_fixtures(FIX / "nodelist.json", FIX / "podlist.json", FIX / "leaselist.json") as srv:
        srv.store.shift_times(datetime.now(UTC) - RECORDED_NOW)  # these paths use the wall clock
        runner = CliRunner()
        dry = runner.invoke(app, ["health", "repair", "--host", srv.url, "--audit", audit, "--state", str(state)])
        assert dry.exit_code == 0, dry.output
        assert "(dry-run)" in dry.output and srv.mutations() == []
        assert json.loads(state.read_text())["reported"]
        applied = runner.invoke(app, ["health", "repair", "--host", srv.url, "--audit", audit, "--apply"])
        assert applied.exit_code == 0, applied.output
        assert any(r.method == "DELETE" for r in srv.mutations())
    outcomes = {r["outcome"] for r in read_audit(audit)}
    assert {"dry_run", "applied", "alerted"} <= outcomes


def test_unreachable_api_server_is_a_clear_error(tmp_path):
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(
        app, ["health", "repair", "--host", f"http://127.0.0.1:{port}", "--audit", str(tmp_path / "a")]
    )
    assert res.exit_code == 2 and "Kubernetes API" in res.output
