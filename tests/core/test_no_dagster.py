import subprocess
import sys


def test_importing_robodata_does_not_import_dagster():
    code = (
        "import sys, importlib, pkgutil, robodata\n"
        "mods = [m.name for m in pkgutil.walk_packages(robodata.__path__, 'robodata.')]\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules\n"
        "             if k == 'dagster' or k.startswith('dagster.') or k.startswith('dagster_'))\n"
        "print(len(mods)); assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) > 5  # really walked the package
