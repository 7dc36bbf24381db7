"""robodata_dagster.resources: the configurable resources, one module per domain (ingest, catalog,
cluster). Installed as `robodata_dagster.resources`; registered in robodata_dagster/definitions.py.
"""
