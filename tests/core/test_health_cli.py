"""`robodata health check/show` with the fake NVML backend."""

import json

from typer.testing import CliRunner

from robodata.cli import app


def test_check_records_and_exits_3_when_excluded(tmp_path):
    spec = tmp_path / "nvml.json"
    spec.write_text(
        json.dumps({"gpus": [{"uuid": "GPU-1", "aggregate_uncorrected": 5}, {"uuid": "GPU-2", "retired_pending": 1}]})
    )
    table = str(tmp_path / "health")
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "health",
            "check",
            "--node",
            "n1",
            "--nvml-backend",
            "fake",
            "--nvml-spec",
            str(spec),
            "--no-probes",
            "--table",
            table,
        ],
    )
    assert res.exit_code == 3, res.output
    assert "page retirement pending" in res.output
    spec.write_text(json.dumps({"gpus": [{"uuid": "GPU-1", "aggregate_uncorrected": 5}]}))
    ok = runner.invoke(
        app,
        [
            "health",
            "check",
            "--node",
            "n2",
            "--nvml-backend",
            "fake",
            "--nvml-spec",
            str(spec),
            "--no-probes",
            "--table",
            table,
            "--json",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output.strip().splitlines()[-1])["assignable"] is True
    shown = runner.invoke(app, ["health", "show", table])
    assert shown.exit_code == 0
    lines = shown.output.splitlines()
    assert lines[0].startswith("n1\tEXCLUDED") and lines[2].startswith("n2\tassignable")


def test_bad_fake_spec_is_a_clear_error(tmp_path):
    spec = tmp_path / "nvml.json"
    spec.write_text(json.dumps({"gpus": [{"volatile_uncorected": 1}]}))
    res = CliRunner().invoke(
        app, ["health", "check", "--nvml-backend", "fake", "--nvml-spec", str(spec), "--no-probes"]
    )
    assert res.exit_code == 2 and "unknown key" in res.output


def test_check_every_repeats_and_needs_a_table(tmp_path):
    spec = tmp_path / "nvml.json"
    spec.write_text(json.dumps({"gpus": [{"uuid": "GPU-1"}]}))
    runner = CliRunner()
    bad = runner.invoke(
        app, ["health", "check", "--nvml-backend", "fake", "--nvml-spec", str(spec), "--no-probes", "--every", "1"]
    )
    assert bad.exit_code == 2
    table = str(tmp_path / "health")
    res = runner.invoke(
        app,
        [
            "health",
            "check",
            "--node",
            "n",
            "--nvml-backend",
            "fake",
            "--nvml-spec",
            str(spec),
            "--no-probes",
            "--table",
            table,
            "--every",
            "0.01",
            "--times",
            "3",
        ],
    )
    assert res.exit_code == 0, res.output
    from deltalake import DeltaTable

    assert DeltaTable(table).to_pyarrow_table().num_rows == 3


def test_daemonset_manifest_is_valid_and_runs_the_check():
    from pathlib import Path

    import kubernetes_validate
    import yaml

    path = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "robodata-health-daemonset.yaml"
    doc = yaml.safe_load(path.read_text())
    kubernetes_validate.validate(doc, "1.31.0", strict=True)
    spec = doc["spec"]["template"]["spec"]
    assert {"operator": "Exists"} in spec["tolerations"]  # cordoned nodes keep producing evidence
    cmd = spec["containers"][0]["command"]
    assert cmd[:3] == ["robodata", "health", "check"] and "--no-probes" in cmd
    assert "nvidia.com/gpu" not in str(spec["containers"][0]["resources"])  # never holds a GPU


def test_an_unknown_nvml_backend_is_refused_naming_the_registered_ones():
    res = CliRunner().invoke(app, ["health", "check", "--nvml-backend", "nope", "--no-probes"])
    assert res.exit_code == 2 and "no NVML backend 'nope'" in res.output and "fake" in res.output


def test_the_product_code_never_imports_the_test_package():
    """The fake NVML is injected through entry points (robodata.nvml_backends), not imported."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "robodata"
    found = [
        f"{p.relative_to(src)}:{n.lineno}"
        for p in sorted(src.rglob("*.py"))
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.ImportFrom | ast.Import)
        and any(
            (name or "").split(".")[0] == "robodata_testing"
            for name in ([n.module] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names])
        )
    ]
    assert found == []
