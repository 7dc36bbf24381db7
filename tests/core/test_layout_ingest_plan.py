"""New data of a known read pattern: `robodata advise --source` over sample recordings (the quality
floor measured against source frames), then `robodata ingest --plan`: containers written once, in
the plan's layout. A plan that does not load stops ingestion before any work, naming the file."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from robodata.cli import app
from robodata.container import EpisodeReader
from robodata.container.plan import LayoutPlan
from robodata.errors import ConfigError
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.layout.sources import source_items

ADVISOR = "gops: [1, 10]\ncrfs: [23]\ncamera_spans_s: [1.0]\narray_spans_s: [2.0]\nsamples: 4\nmin_psnr_db: 20.0\n"


@pytest.fixture(scope="module")
def land(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("land")
    synthesize(
        SynthConfig(episodes=2, duration_s=4.0, cameras=("cam_a",), height=48, width=64, fps=10.0, state_hz=20.0),
        root,
    )
    return root


@pytest.fixture(scope="module")
def plan_path(land, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("plan")
    (tmp / "adv.yaml").write_text(ADVISOR)
    out = tmp / "plan.json"
    res = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["advise", "vla", "--source", str(land), "--config", str(tmp / "adv.yaml"), "--out", str(out), "--quick"]
    )
    assert res.exit_code == 0, res.output
    assert "measured against: source" in res.output
    return out


def test_advise_over_source_records_what_the_floor_was_measured_against(land, plan_path):
    plan = LayoutPlan.load(plan_path)
    ref = plan.quality_reference
    assert ref["measured_against"] == "source" and len(ref["items"]) == 2
    assert ref["via"]["video"]["crf"] <= 12  # converted near-lossless, not at the ingestion default
    assert all(u.startswith(str(land)) for u in ref["items"])
    # one item inside a landing zone is a source too
    one = sorted(p.name for p in land.iterdir() if not p.name.startswith("."))[0]
    assert [it.name for it in source_items([str(land / one)])] == [one]


def test_advise_refuses_no_source_or_two_inputs(land, tmp_path):
    res = CliRunner().invoke(app, ["advise", "vla", "--source", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "nothing" in res.output
    res = CliRunner().invoke(app, ["advise", "vla", "--source", str(land), "-e", str(tmp_path / "x.rdep")])
    assert res.exit_code == 2 and "exactly one" in res.output
    res = CliRunner().invoke(app, ["advise", "vla", "--source", str(land), "--key-map", str(tmp_path / "km.yaml")])
    assert res.exit_code == 2 and "km.yaml" in res.output  # importer options are checked as ingest checks them


def test_ingest_with_plan_writes_the_plans_layout_once(land, plan_path, tmp_path):
    plan = LayoutPlan.load(plan_path)
    outs = {}
    for tag, extra in (("planned", ["--plan", str(plan_path)]), ("default", [])):
        root = tmp_path / tag
        res = CliRunner().invoke(app, ["ingest", str(land), "--root", str(root), "-q", *extra])
        assert res.exit_code == 0, res.output
        outs[tag] = sorted(root.rglob("*.rdep"))
        assert len(outs[tag]) == 2, res.output
    for p, d in zip(outs["planned"], outs["default"], strict=True):
        r, rd = EpisodeReader.open(p), EpisodeReader.open(d)
        try:
            assert r.layout_version == plan.layout_for(r.meta).version != rd.layout_version
            v = r.layout.group_of("cam_a").video
            assert v is not None and v.gop == plan.layout.group_of("cam_a").video.gop
            assert r.meta.streams.keys() == rd.meta.streams.keys()
        finally:
            r.close()
            rd.close()


def test_a_plan_that_does_not_load_stops_ingest_naming_the_file(land, tmp_path):
    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"layout": {"groups": []}}), json.dumps([1, 2])):
        bad.write_text(text)
        with pytest.raises(ConfigError, match="bad.json"):
            IngestSettings(plan=str(bad))
    with pytest.raises(ConfigError, match="missing.json"):
        IngestSettings(plan=str(tmp_path / "missing.json"))
    res = CliRunner().invoke(app, ["ingest", str(land), "--root", str(tmp_path / "r"), "--plan", str(bad)])
    assert res.exit_code == 2 and "bad.json" in res.output
    assert not (tmp_path / "r").exists()  # refused before any work
