import os
from pathlib import Path

# Every package is installed (robodata, robodata_dagster, robodata_testing: `pip install -e .`);
# `tests` and `bench` are found from the repo root, which pytest puts on sys.path (rootdir).
ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("DAGSTER_HOME", str(ROOT / ".dagster_home"))
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")

# Property and fuzz tests: fixed seeds (derandomize) and bounded example counts so `make test`
# stays reproducible and inside its time budget; HYPOTHESIS_PROFILE=deep runs more examples.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("deep", parent=settings.get_profile("ci"), max_examples=5000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
