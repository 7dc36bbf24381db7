"""Relayout is partitioned by catalog day (the catalog's Delta partition)."""

import dagster as dg

RELAYOUT_DAY = dg.DynamicPartitionsDefinition(name="relayout_day")
