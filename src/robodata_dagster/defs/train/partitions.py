"""`training_run` is partitioned by training config and by the curation spec it trains on.

A partition "<spec>|<train_config>" trains specs/training/<train_config>.yaml on the manifest
partition "<spec>". The dependency is structural: `manifest` is partitioned by CURATION_SPECS, one
dimension of TRAINING, so Dagster maps each training partition to exactly that manifest partition
(its built-in multi-to-single-dimension mapping, inferred from the two definitions; see
tests/platform/test_train_partitions.py). Two specs curated in any order each train on their own data.
"""

import dagster as dg

from robodata_dagster.defs.curation.partitions import CURATION_SPECS
from robodata_dagster.lib.registry import TRAIN_CONFIG

TRAIN_CONFIGS = dg.DynamicPartitionsDefinition(name=TRAIN_CONFIG)
TRAINING = dg.MultiPartitionsDefinition({"spec": CURATION_SPECS, "train_config": TRAIN_CONFIGS})


def training_key(spec: str, train_config: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"spec": spec, "train_config": train_config})


def split_key(key: str) -> tuple[str, str]:
    """(spec, train_config) of a training partition key."""
    dims = TRAINING.get_partition_key_from_str(str(key)).keys_by_dimension
    return dims["spec"], dims["train_config"]
