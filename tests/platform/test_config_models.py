"""One config model per domain: every Dagster config that stands for a core settings dataclass has
the same fields with the same defaults, and the environment is read only through dg.EnvVar, when a
step or tick needs it (the executor's variables when the definitions are built), never at import."""

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from robodata.cluster.config import RepairConfig
from robodata.container.meta import VideoSettings
from robodata.ingest.align import AlignConfig as CoreAlignConfig
from robodata.ingest.importers.bounds import WorkBounds
from robodata.ingest.landing.launches import BatchPolicy
from robodata.ingest.landing.stagger import StaggerPolicy
from robodata.ingest.qc import QCSelection, QCThresholds
from robodata.ingest.settings import IngestSettings
from robodata.ingest.topics import TopicRule
from robodata.ingest.video_copy import VideoCopyConfig as CoreVideoCopyConfig
from robodata.layout.relayout import RelayoutConfig
from robodata_dagster.assets.layout import RelayoutRunConfig
from robodata_dagster.lib.registry import SpecDirs
from robodata_dagster.lib.settings import plain, to_settings
from robodata_dagster.resources.catalog import SpecsResource
from robodata_dagster.resources.cluster import ClusterRepairResource, RepairSettings
from robodata_dagster.resources.ingest import (
    AlignConfig,
    BatchConfig,
    IngestResource,
    QCConfig,
    QCThresholdsConfig,
    StaggerConfig,
    TopicRuleConfig,
    VideoConfig,
    VideoCopyConfig,
    WorkBoundsConfig,
)

REPO = Path(__file__).resolve().parents[2]
# the Dagster layer: its helpers under src/ and its folders at the repository root
LAYER = [REPO / "src" / "robodata_dagster", *(REPO / d for d in ("assets", "resources", "sensors", "jobs"))]

# (config model, core dataclass, fields only the model has, core fields the model leaves out,
#  fields whose default the model sets itself)
MIRRORS = [
    # root: the deployment's, travels as the steps' paths (IngestResource.paths), not in the settings
    (IngestResource, IngestSettings, {"bulk", "root"}, set(), set()),
    (AlignConfig, CoreAlignConfig, set(), set(), set()),
    (VideoConfig, VideoSettings, set(), set(), set()),
    (VideoCopyConfig, CoreVideoCopyConfig, set(), set(), set()),
    (WorkBoundsConfig, WorkBounds, set(), set(), set()),
    (QCConfig, QCSelection, set(), set(), set()),
    (QCThresholdsConfig, QCThresholds, set(), set(), set()),
    (TopicRuleConfig, TopicRule, set(), set(), set()),
    (BatchConfig, BatchPolicy, set(), set(), set()),
    (StaggerConfig, StaggerPolicy, set(), set(), set()),
    (RepairSettings, RepairConfig, set(), set(), set()),
    (SpecsResource, SpecDirs, set(), set(), set()),
    # storage options: from AWS_*; plan_path: where layout_plan writes by default
    (RelayoutRunConfig, RelayoutConfig, set(), {"storage_options"}, {"plan_path"}),
]


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return plain_core(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return plain_core(f.default_factory())
    return dataclasses.MISSING


def plain_core(v):
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: plain_core(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [plain_core(x) for x in v]
    if isinstance(v, dict):
        return {k: plain_core(x) for k, x in v.items()}
    return v


@pytest.mark.parametrize("model, core, extra, left_out, own_default", MIRRORS, ids=lambda x: getattr(x, "__name__", ""))
def test_config_model_mirrors_core_settings(model, core, extra, left_out, own_default):
    core_fields = {f.name: f for f in dataclasses.fields(core) if f.init}
    assert set(model.model_fields) - extra == set(core_fields) - left_out
    for name, f in core_fields.items():
        if name in left_out or name in own_default:
            continue
        want, info = _default(f), model.model_fields[name]
        if want is dataclasses.MISSING:
            assert info.is_required(), f"{model.__name__}.{name} has a default, {core.__name__}.{name} has none"
        else:
            got = plain(info.get_default(call_default_factory=True))
            assert got == want, f"{model.__name__}.{name}: {got!r} != {core.__name__}'s {want!r}"


def test_defaults_build_the_core_defaults(monkeypatch):
    for var in ("ROBODATA_STORAGE_ROOT", "ROBODATA_REPAIR_APPLY"):
        monkeypatch.delenv(var, raising=False)
    assert IngestResource().settings() == IngestSettings()
    assert ClusterRepairResource().repair_config() == RepairConfig()
    assert to_settings(BatchPolicy, BatchConfig()) == BatchPolicy()
    assert to_settings(StaggerPolicy, StaggerConfig()) == StaggerPolicy()
    rule = TopicRuleConfig(topic="/arm/.*", kind="joint_state")
    assert IngestResource(topics=[rule]).settings().topics == (TopicRule(topic="/arm/.*", kind="joint_state"),)
    # the environment is read when used: ROBODATA_STORAGE_ROOT set after construction counts
    res = IngestResource()
    monkeypatch.setenv("ROBODATA_STORAGE_ROOT", "/data/robodata")
    assert res.paths().root == "/data/robodata" and IngestResource(root="/x").paths().root == "/x"
    monkeypatch.setenv("ROBODATA_REPAIR_APPLY", "1")
    assert ClusterRepairResource().repair_config().dry_run is False


def test_the_ingest_resource_takes_a_qc_file(tmp_path):
    """Issue 36: the resource's `qc_file` sets per-check blocking and thresholds, as `robodata ingest --qc`."""
    from robodata.ingest.qc_file import load_qc_file

    path = tmp_path / "qc.yaml"
    path.write_text("checks:\n  joints_in_range: {blocking: false, joint_abs_max: 3.5}\n")
    qc = IngestResource(qc_file=str(path)).settings().qc
    assert qc == load_qc_file(str(path)) and "joints_in_range" not in qc.blocking and qc.thresholds.joint_abs_max == 3.5


def test_no_module_reads_the_environment_itself():
    offenders = []
    for path in (p for folder in LAYER for p in folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv"):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "os":
                offenders += [f"{path.relative_to(REPO)}:{node.lineno}" for a in node.names if "env" in a.name]
    assert not offenders, f"read the environment through robodata_dagster.lib.env (dg.EnvVar): {offenders}"


WATCH = """
import json, os, sys
reads = {"import": set(), "load": set()}
phase = "import"
SKIP = ("os.py", "_collections_abc.py")


def reader():  # the code that asked (not os, not Mapping.get, not dg.EnvVar.get_value)
    f = sys._getframe(2)
    while f and (f.f_code.co_filename.startswith("<frozen") or f.f_code.co_filename.endswith(SKIP)
                 or (f.f_code.co_name == "get_value" and "dagster" in f.f_code.co_filename)):
        f = f.f_back
    return f.f_code.co_filename if f else ""


class Watched(type(os.environ)):
    def __getitem__(self, key):
        # robodata's own reads (not dagster's or fsspec's); AWS_* are robodata.storage's, by design
        if key.startswith(("ROBODATA_", "KUBECONFIG")) and "robodata" in reader():
            reads[phase].add(key)
        return super().__getitem__(key)


os.environ.__class__ = Watched
import importlib, pkgutil, robodata_dagster
for m in pkgutil.walk_packages(robodata_dagster.__path__, "robodata_dagster."):
    importlib.import_module(m.name)
phase = "load"
from robodata_dagster.definitions import loaded
defs = loaded()
print(json.dumps({k: sorted(v) for k, v in reads.items()}))
"""


def test_importing_reads_no_variable_and_loading_only_the_executors(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "DAGSTER_HOME": str(tmp_path),
        "ROBODATA_STORAGE_ROOT": str(tmp_path / "state"),
        "ROBODATA_LANDING": "gs://not-a-supported-scheme",  # read by a tick, never at load
        "ROBODATA_KUBE_HOST": "http://127.0.0.1:9",
        "ROBODATA_REPAIR_APPLY": "1",
    }
    out = subprocess.run([sys.executable, "-c", WATCH], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    reads = json.loads(out.stdout.strip().splitlines()[-1])
    assert reads["import"] == []
    # the executor's and whether training is eager (sensors/automation.py)
    executor = {"ROBODATA_DEPLOYMENT", "ROBODATA_STORAGE_ROOT", "ROBODATA_MAX_CONCURRENT_STEPS"}
    assert set(reads["load"]) <= executor | {"ROBODATA_TRAIN_EAGER"}
