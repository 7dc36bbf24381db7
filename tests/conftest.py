import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The Dagster layer (assets/, jobs/, ...) and bench/ live at the repo root.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DAGSTER_HOME", str(ROOT / ".dagster_home"))
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
