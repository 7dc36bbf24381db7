"""`manifest` is partitioned by curation spec: one partition per named spec (specs/curation/<name>.yaml),
added by the spec_registry_sensor or `robodata-dagster specs` (lib/registry.py)."""

import dagster as dg

from robodata_dagster.lib.registry import CURATION_SPEC

CURATION_SPECS = dg.DynamicPartitionsDefinition(name=CURATION_SPEC)
