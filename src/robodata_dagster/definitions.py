"""The robodata code location.

    dagster dev -m robodata_dagster.definitions        (or -w workspace.yaml)

Every module under `robodata_dagster/defs/` is loaded by `dg.load_from_defs_folder` (the project
is declared in `[tool.dg]` of pyproject.toml): add a file there to add definitions. The default
executor comes from the deployment (ROBODATA_DEPLOYMENT=local|prod; lib/deployment.py).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import dagster as dg

from robodata_dagster.lib.deployment import Deployment


@dg.definitions
def defs() -> dg.Definitions:
    folder = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    return dg.Definitions.merge(folder, dg.Definitions(executor=Deployment.from_env().executor()))


@cache
def loaded() -> dg.Definitions:
    """The definitions, built once per process (scripts, tests, reconstructable jobs)."""
    return defs()


def job(name: str) -> dg.JobDefinition:
    """A resolved job of the code location."""
    return loaded().resolve_job_def(name)


def full_job() -> dg.JobDefinition:
    """The resolved `full` ingestion job, for dg.reconstructable (execute_job, re-execution)."""
    return job("full")


def bulk_job() -> dg.JobDefinition:
    return job("bulk")
