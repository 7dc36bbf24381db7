"""Scheduler-record repair sensors (cordons, stale allocations)."""
