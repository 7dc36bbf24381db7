"""Shared real services for the deployment tests: one private Postgres cluster per test session.

Missing binaries skip the test with the reason, except under CI=true where they fail it
(.ci/run installs the Debian packages, so a skip there would hide a broken setup).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from robodata_testing.services import PrivatePostgres, ServiceUnavailable

ROOT = Path(__file__).resolve().parents[2]


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required service missing under CI: {reason}")
    pytest.skip(reason)


@functools.lru_cache(maxsize=1)
def _cluster() -> PrivatePostgres:
    return PrivatePostgres.start()  # stopped at interpreter exit (atexit)


def postgres() -> PrivatePostgres:
    try:
        return _cluster()
    except ServiceUnavailable as exc:
        unavailable(str(exc))
        raise


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    unavailable("chromium not found; install the Debian package `chromium`")
    raise AssertionError


def prod_instance_home(pg: PrivatePostgres, db: str) -> tuple[Path, dict[str, str]]:
    """A DAGSTER_HOME holding deploy/dagster.yaml verbatim, except that the K8sRunLauncher loads a
    (never contacted) kubeconfig instead of in-cluster config; plus the env the yaml reads."""
    pg.create_database(db)
    home = Path(tempfile.mkdtemp(prefix="robodata-dagster-home-"))
    cfg = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    kubeconfig = home / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "test", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "test", "user": {"token": "unused"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            }
        )
    )
    cfg["run_launcher"]["config"].update(load_incluster_config=False, kubeconfig_file=str(kubeconfig))
    (home / "dagster.yaml").write_text(yaml.safe_dump(cfg))
    env = {
        "DAGSTER_PG_USERNAME": pg.user,
        "DAGSTER_PG_PASSWORD": "unused",
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_DB": db,
        "DAGSTER_PG_PORT": str(pg.port),
        "ROBODATA_K8S_NAMESPACE": "robodata",
    }
    return home, env
