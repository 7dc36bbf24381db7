"""Apply robodata's pool (concurrency key) limits to the current Dagster instance.

    DAGSTER_HOME=... python -m deploy.pools          # idempotent; run after each deploy

Limits live in robodata_dagster/lib/step_kinds.py POOL_LIMITS (see docs/operations.md).
"""

from __future__ import annotations

import sys

import dagster as dg

from robodata_dagster.lib.step_kinds import apply_pool_limits


def main() -> int:
    with dg.DagsterInstance.get() as instance:
        for pool, n in apply_pool_limits(instance).items():
            print(f"{pool}: {n} slots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
