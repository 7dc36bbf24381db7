"""robodata: data platform for robot learning (Dagster-free core)."""

__version__ = "0.1.0"
