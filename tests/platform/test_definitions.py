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
