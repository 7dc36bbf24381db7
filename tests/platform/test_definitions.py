import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate():
    env = dict(os.environ, DAGSTER_HOME=str(ROOT / ".dagster_home"))
    exe = Path(sys.executable).parent / "dagster"
    cmd = [str(exe), "definitions", "validate", "-w", "workspace.yaml"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_module_loads_without_warnings_from_any_directory(tmp_path):
    """The installed package is the code location (no sys.path tricks); loading it emits no
    Python warning (deprecated or preview Dagster APIs) and no Dagster warning log line."""
    code = (
        "import logging, warnings\n"
        "records = []\n"
        "class H(logging.Handler):\n"
        "    def emit(self, r): records.append(r.getMessage()) if r.levelno >= logging.WARNING else None\n"
        "logging.getLogger('dagster').addHandler(H())\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    from robodata_dagster.definitions import loaded\n"
        "    d = loaded()\n"
        "    d.resolve_asset_graph(), d.resolve_all_job_defs()\n"
        "print([f'{x.category.__name__}: {x.message}' for x in w] + records)\n"
    )
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_every_asset_has_kinds_and_curation_refreshes_itself(monkeypatch):
    import dagster as dg

    from robodata_dagster.definitions import defs, loaded

    graph = loaded().resolve_asset_graph()
    nodes = {k.to_user_string(): graph.get(k) for k in graph.get_all_asset_keys()}
    assert [name for name, n in nodes.items() if not n.kinds] == []
    assert all("dagster/code_references" in n.metadata for n in nodes.values())
    auto = {name for name, n in nodes.items() if n.automation_condition is not None}
    assert auto == set()  # the catalog automation is a sensor (lib/refresh.py); training is manual by default
    sensors = {s.name: s for s in loaded().sensors or []}
    assert {t.job_name for t in sensors["catalog_automation_sensor"].targets} == {"curation", "acceptance"}
    assert sensors["catalog_automation_sensor"].default_status == dg.DefaultSensorStatus.RUNNING
    assert nodes["episode_metadata"].freshness_policy is not None
    monkeypatch.setenv("ROBODATA_TRAIN_EAGER", "1")
    eager = defs().resolve_asset_graph().get(dg.AssetKey("training_run")).automation_condition
    assert eager is not None and eager.get_label() == "eager"
    assert "any_deps_data_changed" in str(eager) and "any_deps_updated" not in str(eager)  # on data versions


def test_training_takes_the_manifest_as_a_typed_input_through_the_io_manager(tmp_path):
    import dagster as dg

    from robodata_dagster.assets.training import training_run
    from robodata_dagster.lib.lineage import ManifestRef
    from robodata_dagster.resources.manifests import ManifestRefIOManager

    assert "ManifestRef" in training_run.op.ins["manifest"].dagster_type.display_name
    io = ManifestRefIOManager(root=str(tmp_path))
    ref = ManifestRef("demo", "/m/x.parquet", "c" * 64, "s" * 64, 3)
    io.handle_output(dg.build_output_context(asset_key="manifest", partition_key="demo", run_id="r1"), ref)
    loaded_ref = io.load_input(dg.build_input_context(asset_key=dg.AssetKey("manifest"), partition_key="demo"))
    assert loaded_ref == ManifestRef("demo", "/m/x.parquet", "c" * 64, "s" * 64, 3, run_id="r1")
