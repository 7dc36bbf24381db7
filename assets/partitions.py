"""The partitions of the Dagster layer: batches, curation specs, (spec, training config), relayout days.

Ingestion is partitioned by batch (a group of landing items), never by episode. `manifest` is
partitioned by curation spec: one partition per named spec (specs/curation/<name>.yaml), added by the
spec_registry_sensor or `robodata-dagster specs` (lib/registry.py). `training_run` is partitioned by
(curation spec, training config): partition "<spec>|<train_config>" trains
specs/training/<train_config>.yaml on manifest partition "<spec>" (the `spec` dimension; Dagster's
multi-to-single-dimension mapping, see tests/platform/test_train_partitions.py). Relayout is
partitioned by catalog day (the catalog's Delta partition).
"""

import dagster as dg

from robodata_dagster.lib.registry import BATCH, CURATION_SPEC, TRAIN_CONFIG

INGEST_BATCH = dg.DynamicPartitionsDefinition(name=BATCH)

CURATION_SPECS = dg.DynamicPartitionsDefinition(name=CURATION_SPEC)

TRAIN_CONFIGS = dg.DynamicPartitionsDefinition(name=TRAIN_CONFIG)
TRAINING = dg.MultiPartitionsDefinition({"spec": CURATION_SPECS, "train_config": TRAIN_CONFIGS})

DAY = "relayout_day"
RELAYOUT_DAY = dg.DynamicPartitionsDefinition(name=DAY)


def batch_key(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> str:
    """The batch a step runs for: its partition, which must be a batch that was added (a run without
    one, or for a batch never added, fails once, never retried, naming the partition)."""
    key = context.partition_key if context.has_partition_key else None
    if not key:
        raise dg.Failure("ingestion runs need a batch partition", allow_retries=False)
    if not context.instance.has_dynamic_partition(BATCH, key):
        raise dg.Failure(
            f"partition {key!r} is not a batch of {BATCH} (add it with `robodata-dagster add-batch`, or let the "
            "landing-zone sensor cut it)",
            allow_retries=False,
        )
    return key


def training_key(spec: str, train_config: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"spec": spec, "train_config": train_config})


def split_key(key: str) -> tuple[str, str]:
    """(spec, train_config) of a training partition key."""
    dims = TRAINING.get_partition_key_from_str(str(key)).keys_by_dimension
    return dims["spec"], dims["train_config"]
