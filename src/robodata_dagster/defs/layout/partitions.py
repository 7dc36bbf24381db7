"""Relayout is partitioned by catalog day (the catalog's Delta partition)."""

import dagster as dg

DAY = "relayout_day"
RELAYOUT_DAY = dg.DynamicPartitionsDefinition(name=DAY)
