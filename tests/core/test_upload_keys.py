"""Key safety and config validation: refused up front, with a clear reason."""

from __future__ import annotations

import pytest

from robodata.config import from_dict
from robodata.errors import ConfigError
from robodata.upload.config import MIB, UploadConfig
from robodata.upload.digest import digest_file, expected_etag
from robodata.upload.keys import UnsafeKeyError, episode_key

P = "landing/site-a"


@pytest.mark.parametrize(
    "name,rel,reason",
    [
        ("..", None, "'..' path component"),
        (".", None, "'.' path component"),
        ("../site-b", None, "contains '/'"),
        ("ep1", "../../site-b/x", "'..' path component"),
        ("ep1", "/etc/passwd", "absolute path"),
        ("ep1", "cam/../../x", "'..' path component"),
        ("ep\\..\\x", None, "backslash"),
        ("ep1", "cam\\x.jpg", "backslash"),
        ("ep\x00.mcap", None, "NUL byte"),
        ("ep\n1", None, "control character"),
        ("", None, "empty"),
        ("ep1", "cam//x", "empty"),
        ("ep\udcff", None, "not valid UTF-8"),
        ("e" * 1100, None, "longer than 1024"),
    ],
)
def test_unsafe_names_are_refused(name, rel, reason):
    with pytest.raises(UnsafeKeyError, match=reason.replace("(", r"\(")) as ei:
        episode_key(P, name, rel)
    assert isinstance(ei.value.reason, str)


def test_safe_keys_stay_under_the_prefix():
    assert episode_key(P, "ep_0001.mcap") == "landing/site-a/ep_0001.mcap"
    assert episode_key(P, "ep 1 (retry)", "cam_left/000001.jpg") == "landing/site-a/ep 1 (retry)/cam_left/000001.jpg"
    assert episode_key(P, "épisode..1") == "landing/site-a/épisode..1"  # dots inside a name are fine


@pytest.mark.parametrize("prefix", ["", "/abs", "a/../b", "a\\b", "a/", "a//b", "x\x00"])
def test_bad_site_prefix_is_a_config_error(prefix):
    with pytest.raises(ConfigError, match="site_prefix"):
        UploadConfig(spool="/s", bucket="b", site_prefix=prefix)


@pytest.mark.parametrize(
    "field,value,msg",
    [
        ("completion", "mtime", "completion"),
        ("verify", "trust-me", "verify"),
        ("part_size", 1024, "part_size"),
        ("bandwidth_bytes_per_s", 0, "bandwidth"),
        ("bucket", "a/b", "bucket"),
        ("endpoint_url", "ftp://x", "endpoint_url"),
        ("poll_interval_s", 0, "poll_interval_s"),
    ],
)
def test_config_validated_up_front(field, value, msg):
    with pytest.raises(ConfigError, match=msg):
        UploadConfig(**{"spool": "/s", "bucket": "b", "site_prefix": P, field: value})


def test_config_from_dict_rejects_typos_and_nests_retry():
    cfg = from_dict(UploadConfig, {"spool": "/s", "bucket": "b", "site_prefix": P, "retry": {"max_attempts": 3}})
    assert cfg.retry.max_attempts == 3
    with pytest.raises(ConfigError, match="unknown key"):
        from_dict(UploadConfig, {"spool": "/s", "bucket": "b", "site_prefix": P, "part_sise": 1})
    with pytest.raises(ConfigError, match="max_attempts"):
        from_dict(UploadConfig, {"spool": "/s", "bucket": "b", "site_prefix": P, "retry": {"max_attempts": 0}})


def test_part_size_grows_past_10000_parts():
    cfg = UploadConfig(spool="/s", bucket="b", site_prefix=P, part_size=5 * MIB)
    assert cfg.part_size_for(10 * MIB) == 5 * MIB
    big = 100_000 * MIB
    assert -(-big // cfg.part_size_for(big)) <= 10_000


def test_digest_matches_s3_etag_rules(tmp_path):
    import hashlib

    p = tmp_path / "f"
    data = bytes(range(256)) * 1000  # 256_000 bytes
    p.write_bytes(data)
    d = digest_file(p, 100_000)
    md5s = [hashlib.md5(data[i : i + 100_000]).hexdigest() for i in range(0, len(data), 100_000)]
    assert d.part_md5s == tuple(md5s) and d.size == len(data)
    assert d.etag == hashlib.md5(b"".join(bytes.fromhex(m) for m in md5s)).hexdigest() + "-3"
    assert d.sha256 == hashlib.sha256(data).hexdigest()
    assert digest_file(p, len(data)).etag == hashlib.md5(data).hexdigest()  # exactly one part: plain PUT
    (tmp_path / "empty").write_bytes(b"")
    assert digest_file(tmp_path / "empty", 10).etag == hashlib.md5(b"").hexdigest()
    assert expected_etag(["00" * 16], False) == "00" * 16
