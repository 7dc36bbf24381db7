"""Automatic resume config: the instance yaml enables run retries; recovery tags match Dagster's."""

import shutil
from pathlib import Path

import dagster as dg
from dagster._core.storage import tags as dagster_tags

from robodata.health import recovery

ROOT = Path(__file__).resolve().parents[2]


def test_local_instance_retries_runs(tmp_path):
    shutil.copy(ROOT / "deploy" / "dagster.local.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.run_retries_enabled
        assert instance.run_retries_max_retries == 2


def test_recovery_reads_dagsters_retry_tags():
    assert recovery.RETRY_NUMBER_TAG == dagster_tags.RETRY_NUMBER_TAG
    assert recovery.PARENT_RUN_ID_TAG == dagster_tags.PARENT_RUN_ID_TAG
    assert recovery.ROOT_RUN_ID_TAG == dagster_tags.ROOT_RUN_ID_TAG
