"""Every resource, the CLI and the ingestion steps find the state under one root where
robodata.storage.StateRoot says it is: what one writes, the others read, by the same paths."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from robodata.storage import StateRoot
from robodata_dagster.lib.lineage import ManifestRef
from robodata_dagster.resources.catalog import CatalogResource
from robodata_dagster.resources.ingest import IngestResource, LandingResource
from robodata_dagster.resources.manifests import ManifestRefIOManager

TABLES = ("raw_episodes", "aligned_tracks", "qc_results", "conversions")


def _resources(root: str = "") -> dict[str, str]:
    ingest, catalog = IngestResource(root=root), CatalogResource(root=root)
    return {
        "paths": repr(StateRoot(ingest.paths())),
        "tables": ingest.paths().table("raw_episodes"),
        "batch": ingest.paths().batch_manifest("b1"),
        "landing": LandingResource().landing_uri(ingest.state()),
        "catalog": catalog.catalog_uri(),
        "catalog_table": catalog.catalog().uri,
        "acceptance": catalog.acceptance_table(),
        "manifests": catalog.manifests_uri(),
        "ref": ManifestRefIOManager(root=root).uri("spec-a"),
    }


def _expected(state: StateRoot) -> dict[str, str]:
    return {
        "paths": repr(state),
        "tables": state.table("raw_episodes"),
        "batch": state.batch_manifest("b1"),
        "landing": state.landing,
        "catalog": state.catalog,
        "catalog_table": state.catalog,
        "acceptance": state.acceptance,
        "manifests": state.manifests,
        "ref": state.manifest_ref("spec-a"),
    }


@pytest.mark.parametrize("where", ["s3://bucket/state", "local"])
def test_each_resource_asks_the_state_root(where, tmp_path, monkeypatch):
    from robodata.curate.commands import default_catalog

    monkeypatch.delenv("ROBODATA_LANDING", raising=False)
    monkeypatch.delenv("ROBODATA_CATALOG", raising=False)
    root = str(tmp_path / "state") if where == "local" else where
    state = StateRoot(root)
    assert _resources(root) == _expected(state)  # configured on the resource
    monkeypatch.setenv("ROBODATA_STORAGE_ROOT", root)
    assert _resources() == _expected(state)  # from the deployment's variable
    assert default_catalog() == state.catalog  # the CLI's
    other = StateRoot(root + "-other")
    assert _resources(other.root) == _expected(other)


def test_the_cli_steps_and_resources_meet_under_one_root(tmp_path, monkeypatch):
    """`robodata ingest` writes the batch, its tables, containers and catalog; the Dagster catalog
    resource reads that catalog; `robodata curate` finds it and writes its manifest from the root
    alone; the manifest IO manager keeps the ref under the same root."""
    from robodata.cli import app
    from robodata.ingest.synth import SynthConfig, synthesize

    land, root = tmp_path / "landing", tmp_path / "state"
    cfg = SynthConfig(episodes=1, duration_s=1.0, cameras=("cam",), height=48, width=64, fps=10.0, state_hz=20.0)
    synthesize(cfg, land)
    state = StateRoot(root)
    for var in ("ROBODATA_CATALOG", "ROBODATA_LANDING"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ROBODATA_STORAGE_ROOT", str(root))

    res = CliRunner().invoke(app, ["ingest", str(land), "--batch", "b1", "--quiet"])
    assert res.exit_code == 0, res.output
    assert Path(state.batch_manifest("b1")).is_file()
    for name in TABLES:
        assert DeltaTable(state.table(name)).to_pyarrow_table().num_rows >= 1, name
    (row,) = CatalogResource().catalog().table().to_pyarrow_table(columns=["episode_id", "uri"]).to_pylist()
    assert row["uri"] == state.container("b1", row["episode_id"])
    assert sorted(Path(root).rglob("*.rdep")) == [Path(row["uri"])]

    spec = tmp_path / "all.yaml"
    spec.write_text(json.dumps({"version": 1, "name": "all"}))
    res = CliRunner().invoke(app, ["curate", str(spec), "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    manifest = json.loads(res.stdout.strip().splitlines()[-1])["manifest"]
    assert Path(manifest).parent == Path(state.manifests) == Path(CatalogResource().manifests_uri())

    io = ManifestRefIOManager()
    io.handle_output(
        dg.build_output_context(asset_key="manifest", partition_key="all", run_id="r1"),
        ManifestRef("all", manifest, "c" * 64, "s" * 64, 1),
    )
    assert json.loads(Path(state.manifest_ref("all")).read_text())["path"] == manifest
