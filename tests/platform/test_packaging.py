"""The Dagster layer's shape: assets/ resources/ sensors/ jobs/ at the repository root, installed as
robodata_dagster.<folder>; every definition in them registered; every package in the wheel; the
code location loads from the wheel alone, outside the checkout."""

import importlib
import os
import pkgutil
import subprocess
import sys
import zipfile
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

ROOT = Path(__file__).resolve().parents[2]
LAYER = ("assets", "resources", "sensors", "jobs")
DEFINITION_TYPES = (
    dg.AssetsDefinition,
    dg.AssetChecksDefinition,
    dg.JobDefinition,
    UnresolvedAssetJobDefinition,
    dg.SensorDefinition,
    dg.ScheduleDefinition,
)


def layer_modules() -> list:
    out = []
    for folder in LAYER:
        pkg = importlib.import_module(f"robodata_dagster.{folder}")
        out += [importlib.import_module(f"{pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    return out


def unregistered(defs: dg.Definitions, modules: list) -> list[str]:
    """Definitions and resource classes declared in `modules` that `defs` does not register."""
    registered = {id(x) for x in [*(defs.assets or []), *(defs.asset_checks or []), *(defs.jobs or [])]}
    registered |= {id(x) for x in [*(defs.sensors or []), *(defs.schedules or [])]}
    resource_types = {type(r) for r in (defs.resources or {}).values()}
    missing = []
    for mod in modules:
        for name, obj in vars(mod).items():
            if isinstance(obj, DEFINITION_TYPES) and id(obj) not in registered:
                missing.append(f"{mod.__name__}.{name}")
            is_resource = isinstance(obj, type) and issubclass(obj, dg.ConfigurableResource)
            if is_resource and obj.__module__ == mod.__name__ and obj not in resource_types:
                missing.append(f"{mod.__name__}.{name}")
    return sorted(missing)


def test_the_layer_is_the_installed_package_of_the_root_folders():
    for folder in LAYER:
        pkg = importlib.import_module(f"robodata_dagster.{folder}")
        assert Path(pkg.__file__).resolve().parent == ROOT / folder


def test_every_definition_of_the_layer_is_registered():
    from robodata_dagster.definitions import loaded

    defs, modules = loaded(), layer_modules()
    assert unregistered(defs, modules) == []
    # the check itself finds a definition left out
    from robodata_dagster.assets.curation import manifest

    fewer = dg.Definitions(
        assets=[a for a in defs.assets or [] if a is not manifest],
        asset_checks=defs.asset_checks,
        jobs=defs.jobs,
        sensors=defs.sensors,
        schedules=defs.schedules,
        resources={k: v for k, v in (defs.resources or {}).items() if k != "landing"},
    )
    assert unregistered(fewer, modules) == [
        "robodata_dagster.assets.curation.manifest",
        "robodata_dagster.resources.ingest.LandingResource",
    ]


def source_packages() -> set[str]:
    """Every package of the checkout, by its installed name."""
    pkgs = {".".join(p.parent.relative_to(ROOT / "src").parts) for p in (ROOT / "src").rglob("__init__.py")}
    for folder in LAYER:
        inits = (ROOT / folder).rglob("__init__.py")
        pkgs |= {".".join(("robodata_dagster", *p.parent.relative_to(ROOT).parts)) for p in inits}
    return pkgs


def wheel_packages(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n.rsplit("/", 1)[0].replace("/", ".") for n in z.namelist() if n.endswith("/__init__.py")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=out)
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = out.glob("robodata-*.whl")
    return whl


def test_every_package_is_in_the_wheel(wheel):
    assert source_packages() - wheel_packages(wheel) == set()
    assert {f"robodata_dagster.{f}" for f in LAYER} <= wheel_packages(wheel)


def test_the_code_location_loads_from_the_wheel_outside_the_checkout(wheel, tmp_path):
    target, cwd = tmp_path / "site", tmp_path / "elsewhere"
    cwd.mkdir()
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile"]
    cmd = [*pip, "--target", str(target), str(wheel)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    code = (
        "import robodata_dagster.assets as a, robodata_dagster.definitions as d\n"
        "defs = d.loaded(); defs.resolve_asset_graph(); defs.resolve_all_job_defs()\n"
        "print(a.__file__)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target), DAGSTER_HOME=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip().splitlines()[-1]).is_relative_to(target)
