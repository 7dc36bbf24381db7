"""Thin Dagster entry point: every module under assets/, jobs/ and sensors/ is discovered.

Add a file to one of those folders to add definitions; nothing needs registering here.
Resources come from resources/ (one place, chosen by ROBODATA_DEPLOYMENT).
"""

from __future__ import annotations

import dagster as dg

import assets
import jobs
import sensors
from resources import deployment_executor, deployment_resources, submodules

defs = dg.load_definitions_from_modules(
    [*submodules(assets), *submodules(jobs), *submodules(sensors)],
    resources=deployment_resources(),
    executor=deployment_executor(),
)
