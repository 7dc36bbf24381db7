"""robodata's Dagster layer: one code location (`robodata_dagster.definitions`), thin, by domain.

    assets/ resources/ sensors/ jobs/      (repository root; installed as robodata_dagster.<folder>)
    src/robodata_dagster/definitions.py    registers every definition, explicitly
    src/robodata_dagster/lib/              the layer's small shared helpers

The work itself is done by the Dagster-free core, `robodata`.
"""
