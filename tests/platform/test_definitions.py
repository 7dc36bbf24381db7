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
