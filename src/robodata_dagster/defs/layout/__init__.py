"""Workload-aware layout: the advised plan and catalog days re-laid into it."""
