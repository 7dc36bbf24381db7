"""robodata_dagster.sensors: landing-zone, spec-registry and cluster-repair sensors, one module per
domain. Installed as `robodata_dagster.sensors`; registered in robodata_dagster/definitions.py.
"""
