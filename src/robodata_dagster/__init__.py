"""robodata's Dagster layer: one code location (`robodata_dagster.definitions`), grouped by domain.

    defs/<domain>/{assets,checks,jobs,sensors,schedules,partitions,resources}.py

Every module under `defs/` is loaded by `dg.load_from_defs_folder` (the project is declared in
`[tool.dg]` of pyproject.toml); helpers shared across domains live in `lib/`. The work itself is
done by the Dagster-free core, `robodata`.
"""
