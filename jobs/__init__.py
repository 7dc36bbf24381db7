"""robodata_dagster.jobs: run profiles (ingest, training, layout) and housekeeping jobs with their
schedules (maintenance). Installed as `robodata_dagster.jobs`; registered in robodata_dagster/definitions.py.
"""
