import pyarrow as pa
import pytest

from robodata.catalog.order import stable_hash64, stable_hash64_py, unit_interval
from robodata.curate.spec import load_spec, spec_from_dict
from robodata.errors import ConfigError

YAML = """
version: 1
name: fold-v3
filters:
  - {column: day, op: between, value: ["2024-01-02", "2024-01-05"]}
  - {column: task, op: in, value: [fold_towel, fold_shirt]}
  - {column: quality_score, op: ">=", value: 0.8}
mix: {by: task, weights: {fold_towel: 3, fold_shirt: 1}}
budget: {total_hours: 10, per_group_hours: {fold_shirt: 1.5}}
exclude: {robots: [sfo-1-r003], episode_ids_file: excluded.txt}
split: {val_fraction: 0.1, salt: s}
"""


def test_yaml_spec_loads_typed(tmp_path):
    (tmp_path / "excluded.txt").write_text("# bad episodes\nep-2\nep-1\n")
    p = tmp_path / "spec.yaml"
    p.write_text(YAML)
    spec = load_spec(p)
    assert spec.filters[1].value == ["fold_towel", "fold_shirt"]
    assert spec.mix.weight("fold_towel") == 3 and spec.mix.weight("other") == 1.0
    assert spec.budget.per_group_hours == {"fold_shirt": 1.5}
    assert spec.excluded_ids(tmp_path) == ["ep-1", "ep-2"]
    h = spec.spec_hash(tmp_path)
    assert h == load_spec(p).spec_hash(tmp_path) and len(h) == 64
    (tmp_path / "excluded.txt").write_text("ep-1\n")
    assert spec.spec_hash(tmp_path) != h  # the exclusion file's content is part of the hash


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"version": 3}, "version 3 not supported"),
        ({"filters": [{"column": "colour", "op": "==", "value": 1}]}, "not a catalog column"),
        ({"filters": [{"column": "site", "op": "~", "value": 1}]}, "op '~'"),
        ({"filters": [{"column": "site", "op": "in", "value": "sfo-1"}]}, "non-empty list"),
        ({"filters": [{"column": "day", "op": "between", "value": ["a"]}]}, r"\[low, high\]"),
        ({"mix": {"by": "robot"}}, "mix.by"),
        ({"mix": {"by": "task", "weights": {"a": -1}}}, r"must be in \[0"),
        ({"split": {"val_fraction": 1.5}}, "val_fraction"),
        ({"budget": {"per_group_hours": {"a": 1}}}, "needs a mix"),
        ({"extra": 1}, "unknown key"),
    ],
)
def test_bad_specs_fail_up_front(patch, message):
    doc = {"version": 1, "name": "x", **patch}
    with pytest.raises(ConfigError, match=message):
        spec_from_dict(doc)


HOSTILE = [
    # (patch, the field the message must name)
    ({"name": "a\x00b"}, "name"),
    ({"name": "x" * 400}, "name"),
    ({"name": 7}, "name"),
    ({"name": "../up"}, "name"),
    ({"version": True}, "version"),
    ({"filters": {"column": "site", "op": "==", "value": "a"}}, "filters"),
    ({"filters": [5]}, r"filters\[0\]"),
    ({"filters": [{"column": "site", "op": "contains", "value": "a"}]}, "site contains"),
    ({"filters": [{"column": "cameras", "op": "==", "value": "a"}]}, "cameras =="),
    ({"filters": [{"column": "cameras", "op": "contains", "value": 3}]}, "cameras contains"),
    ({"filters": [{"column": "site", "op": "in", "value": [["a"]]}]}, "site in"),
    ({"filters": [{"column": "site", "op": "in", "value": ["a", None]}]}, "site in"),
    ({"filters": [{"column": "site", "op": "==", "value": {"a": 1}}]}, "site =="),
    ({"filters": [{"column": "num_frames", "op": ">", "value": "many"}]}, "num_frames >"),
    ({"filters": [{"column": "num_frames", "op": ">", "value": 2**70}]}, "num_frames >"),
    ({"filters": [{"column": "duration_s", "op": ">", "value": float("nan")}]}, "duration_s >"),
    ({"filters": [{"column": "success", "op": "==", "value": "yes"}]}, "success =="),
    ({"filters": [{"column": "success", "op": "<", "value": True}]}, "success <"),
    ({"filters": [{"column": "day", "op": ">=", "value": "yesterday"}]}, "day >="),
    ({"filters": [{"column": "start_time", "op": "<", "value": "noon"}]}, "start_time <"),
    ({"filters": [{"column": ["site"], "op": "==", "value": 1}]}, "column"),
    ({"filters": [{"column": "site", "op": ["=="], "value": 1}]}, "op"),
    ({"mix": 5}, "mix"),
    ({"mix": {"by": "task", "weights": [1, 2]}}, "mix.weights"),
    ({"mix": {"by": "task", "weights": {"a": "x"}}}, "mix.weights.a"),
    ({"mix": {"by": "task", "weights": {1: 2}}}, "mix.weights: key 1"),
    ({"mix": {"by": "task", "default_weight": "1"}}, "mix.default_weight"),
    ({"mix": {"by": "task", "weights": {"a": 1e300}}}, "mix weight"),
    ({"budget": {"total_hours": "10"}}, "budget.total_hours"),
    ({"budget": {"total_hours": float("inf")}}, "budget.total_hours"),
    ({"split": {"val_fraction": "0.1"}}, "split.val_fraction"),
    ({"split": {"salt": 3}}, "split.salt"),
    ({"exclude": {"episode_ids": [["ep-1"]]}}, r"exclude.episode_ids\[0\]"),
    ({"exclude": {"episode_ids": "ep-1"}}, "exclude.episode_ids"),
    ({"exclude": {"episode_ids": ["ep\x00"]}}, r"exclude.episode_ids\[0\]"),
    ({"exclude": {"robots": [""]}}, r"exclude.robots\[0\]"),
    ({"exclude": {"episode_ids_file": 3}}, "exclude.episode_ids_file"),
    ({"exclude": ["a"]}, "exclude"),
    ({"catalog_version": 2**80}, "catalog_version"),
    ({"catalog_version": "3"}, "catalog_version"),
    ({3: "x"}, "key 3"),
]


@pytest.mark.parametrize("patch, field", HOSTILE)
def test_hostile_specs_are_config_errors_naming_the_field(patch, field):
    with pytest.raises(ConfigError, match=field):
        spec_from_dict({"version": 1, "name": "x", **patch})


def test_a_spec_that_is_not_a_mapping_is_a_config_error():
    for doc in (None, [], "spec", 3):
        with pytest.raises(ConfigError, match="mapping"):
            spec_from_dict(doc)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 5000 + "]" * 5000, "nested more than"),
        ("version: 1\nname: x\nfilters: " + "[" * 100 + "]" * 100, "nested more than"),
        ("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
         + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True))
         + "version: 1\nname: x\n", "more than"),
        ("version: 1\nname: x\nfilters: {column: site, op: '==', value: a}\n", "filters"),
        ("- 1\n- 2\n", "mapping at top level"),
        ("version: 1\nname: [unclosed\n", "invalid YAML"),
    ],
)  # fmt: skip
def test_hostile_spec_files_are_config_errors(tmp_path, text, message):
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_spec(p)


def test_binary_and_oversized_spec_files_are_config_errors(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_bytes(b"version: 1\nname: \xff\xfe\x00\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_spec(p)
    p.write_bytes(b"#" * (4 * 1024 * 1024 + 1))
    with pytest.raises(ConfigError, match="at most"):
        load_spec(p)
    with pytest.raises(ConfigError, match="not a file"):
        load_spec(tmp_path)


def _spec_with_file(tmp_path, rel, content: bytes | None = b"ep-1\n"):
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    if content is not None:
        (folder / "ids.txt").write_bytes(content)
    p = folder / "spec.yaml"
    p.write_text(f"version: 1\nname: x\nexclude: {{episode_ids_file: {rel!r}}}\n")
    return p


@pytest.mark.parametrize(
    "rel, content, message",
    [
        ("ids.txt", b"ep-1\n\x00\xff\xfebinary", "not UTF-8"),
        ("ids.txt", b"ep-1\n[nested, ids]\n", "line 2"),
        ("ids.txt", b"ep-1\nep\x002\n", "line 2"),
        ("missing.txt", None, "not found"),
        ("../secret.txt", b"", "may not hold"),
        ("/etc/hostname", b"", "relative"),
        ("link.txt", b"", "outside"),
    ],
)
def test_exclusion_file_is_confined_to_the_spec_folder_and_checked(tmp_path, rel, content, message):
    from robodata.curate.select import evaluate

    (tmp_path / "secret.txt").write_text("ep-9\n")
    p = _spec_with_file(tmp_path, rel, content)
    (p.parent / "link.txt").symlink_to(tmp_path / "secret.txt")
    spec = load_spec(p)
    with pytest.raises(ConfigError, match=message):
        spec.spec_hash(p.parent)
    import polars as pl

    with pytest.raises(ConfigError, match=message):
        evaluate(spec, pl.LazyFrame(), base_dir=p.parent)


def test_exclusion_file_needs_a_root(tmp_path):
    spec = load_spec(_spec_with_file(tmp_path, "ids.txt"))
    assert spec.excluded_ids(tmp_path / "specs") == ["ep-1"]
    with pytest.raises(ConfigError, match="needs a root"):
        spec.excluded_ids(None)


def test_missing_spec_file_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_spec(tmp_path / "none.yaml")


def test_stable_hash_matches_reference_and_is_spread():
    values = ["", "a", "ep-0000000001", "ünïcode", "x" * 70, None]
    got = stable_hash64(pa.array(values), salt="salt")
    assert [int(g) for g in got] == [stable_hash64_py(v or "", "salt") for v in values]
    # pinned values: an episode's split must never change across library versions
    assert int(stable_hash64(pa.array(["ep-0000000001"]))[0]) == 0x257A280E095AF1A2
    assert int(stable_hash64(pa.array(["ep-0000000001"]), "bench/split")[0]) == 0x4BEFBDAE054EF71A
    u = unit_interval(stable_hash64(pa.array([f"ep-{i}" for i in range(20000)])))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert abs((u < 0.1).mean() - 0.1) < 0.01
