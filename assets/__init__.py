"""robodata_dagster.assets: the software-defined assets and asset checks, one module per domain
(ingest, ingest_checks, curation, training, layout) and their partitions (partitions.py).

Installed as `robodata_dagster.assets` (pyproject.toml package-dir); import it by that name only.
Every definition here is registered in robodata_dagster/definitions.py (a test fails otherwise).
"""
