import fsspec
import pyarrow as pa
import pytest

from robodata.errors import ConfigError
from robodata.storage import StorageLocation


@pytest.fixture(scope="module")
def s3():
    from robodata_testing.services import LoopbackS3

    with LoopbackS3.start("robodata-core-test") as srv:
        yield srv


def test_s3_location_reaches_moto_with_fsspec_and_deltalake(s3):
    import deltalake

    loc = s3.location("prod")
    with fsspec.open(loc.join("containers", "ep1.rdep"), "wb", **loc.fsspec_options()) as f:
        f.write(b"payload")
    with fsspec.open(loc.join("containers", "ep1.rdep"), "rb", **loc.fsspec_options()) as f:
        assert f.read() == b"payload"
    uri = loc.join("tables", "catalog")
    deltalake.write_deltalake(uri, pa.table({"episode_id": ["a", "b"]}), storage_options=loc.delta_options())
    deltalake.write_deltalake(uri, pa.table({"episode_id": ["c"]}), mode="append", storage_options=loc.delta_options())
    dt = deltalake.DeltaTable(uri, storage_options=loc.delta_options())
    assert dt.version() == 1 and sorted(dt.to_pyarrow_table().column("episode_id").to_pylist()) == ["a", "b", "c"]


def test_from_env_maps_aws_variables_and_local_paths(tmp_path):
    loc = StorageLocation.from_env(
        "s3://b/p/", {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_DEFAULT_REGION": "eu-west-1"}
    )
    assert loc.root == "s3://b/p" and loc.region == "eu-west-1" and loc.key is None
    assert loc.delta_options()["AWS_ALLOW_HTTP"] == "true" and "AWS_ACCESS_KEY_ID" not in loc.delta_options()
    assert "key" not in loc.fsspec_options()  # default credential chain (IRSA, instance profile)
    local = StorageLocation.from_env(str(tmp_path / "x"), {})
    assert local.fsspec_options() == {} and local.delta_options() == {} and local.join("a") == f"{tmp_path}/x/a"


@pytest.mark.parametrize(
    "kw",
    [{"root": ""}, {"root": "relative/dir"}, {"root": "gs://b"}, {"root": "s3://"}, {"root": "s3://b", "key": "k"}],
)
def test_bad_locations_are_config_errors(kw):
    with pytest.raises(ConfigError):
        StorageLocation(**kw)


def test_join_refuses_escapes():
    loc = StorageLocation("s3://b/p")
    for part in ("/abs", "a/../b"):
        with pytest.raises(ConfigError):
            loc.join(part)
