"""Scheduler-record repair over the Kubernetes API: restore healthy cordoned nodes and
clear allocations left behind by jobs that no longer run. Dagster-free; the sensors in
sensors/cluster_repair.py call into it."""
