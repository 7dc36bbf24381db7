"""Ingestion: landing zone -> batch partitions -> containers, QC checks and catalog rows."""
