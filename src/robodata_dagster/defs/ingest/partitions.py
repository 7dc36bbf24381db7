"""Ingestion is partitioned by batch (a group of landing items), never by episode."""

import dagster as dg

BATCH = "ingest_batch"
INGEST_BATCH = dg.DynamicPartitionsDefinition(name=BATCH)


def batch_key(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> str:
    """The batch a step runs for (its run's partition)."""
    key = context.run.tags.get("dagster/partition") if context.run else None
    if not key:
        raise dg.Failure("ingestion runs need a batch partition (tag dagster/partition)", allow_retries=False)
    return key
