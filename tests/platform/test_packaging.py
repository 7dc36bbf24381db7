"""The Dagster layer's shape: assets/ resources/ sensors/ jobs/ at the repository root, installed as
robodata_dagster.<folder>; every definition in them registered; every package in the wheel; the
code location loads from the wheel alone, outside the checkout."""

import importlib
import pkgutil
import zipfile
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from bench.dagster_paths_wheel import build_wheel, load_from_wheel

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
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    asset_keys = {k for a in assets for k in a.keys}  # registered assets are wrapped (code references)
    registered = {id(x) for x in [*(defs.asset_checks or []), *(defs.jobs or [])]}
    registered |= {id(x) for x in [*(defs.sensors or []), *(defs.schedules or [])]}
    resource_types = {type(r) for r in (defs.resources or {}).values()}
    missing = []
    for mod in modules:
        for name, obj in vars(mod).items():
            if isinstance(obj, dg.AssetsDefinition):
                if not set(obj.keys) <= asset_keys:
                    missing.append(f"{mod.__name__}.{name}")
            elif isinstance(obj, DEFINITION_TYPES) and id(obj) not in registered:
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
    fewer = dg.Definitions(
        assets=[a for a in defs.assets or [] if dg.AssetKey("manifest") not in a.keys],
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
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_every_package_is_in_the_wheel(wheel):
    assert source_packages() - wheel_packages(wheel) == set()
    assert {f"robodata_dagster.{f}" for f in LAYER} <= wheel_packages(wheel)


def test_the_code_location_loads_from_the_wheel_outside_the_checkout(wheel, tmp_path):
    ok, detail = load_from_wheel(wheel, tmp_path)
    assert ok, detail
    assert Path(detail).is_relative_to(tmp_path / "site")
