"""Curation cost linear in the number of filter terms, with a bound (issue 44, item 3): the
predicate is one n-ary AND (a chain of binary ANDs cost Polars O(n^2): 1,000 `in` filters took
7.6 GB over a Delta scan), a spec holds at most MAX_FILTERS filters, its YAML is parsed once by
libyaml, and its exclusion file is read once per evaluation."""

from __future__ import annotations

import random

import pytest
import yaml

from bench.robustness_manifest import random_catalog
from robodata.catalog.table import Catalog
from robodata.curate import specfile
from robodata.curate.predicate import spec_predicate
from robodata.curate.run import curate
from robodata.curate.spec import MAX_FILTERS, load_spec, spec_from_dict
from robodata.errors import ConfigError


def _filters(n: int) -> list[dict]:
    return [{"column": "task", "op": "in", "value": ["fold", "pick", "wipe", f"t{i}"]} for i in range(n)]


def test_the_predicate_is_one_n_ary_and_however_many_filters():
    spec = spec_from_dict({"version": 1, "name": "many", "filters": _filters(500)})
    inputs = spec_predicate(spec, None).meta.pop()
    assert len(inputs) == 501  # the 500 filters and the QC term, side by side: depth 1, not 500


def test_a_spec_over_the_bound_on_filters_is_a_config_error(tmp_path):
    spec_from_dict({"version": 1, "name": "at-bound", "filters": _filters(MAX_FILTERS)})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "name": "over", "filters": _filters(2 * MAX_FILTERS)}))
    with pytest.raises(ConfigError, match=f"2000 filters, at most {MAX_FILTERS}"):
        load_spec(path)


def test_the_spec_file_is_parsed_once_by_libyaml_and_its_exclusions_read_once(tmp_path, monkeypatch):
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: the pure-Python loader checks events first")
    (tmp_path / "ids.txt").write_text("# left out\nep-00\n  ep-01 \n\nep-00\n")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "name": "x", "exclude": {"episode_ids_file": "ids.txt"}}))

    def pure_python(*a, **k):
        raise AssertionError("the pure-Python YAML parser was used")

    monkeypatch.setattr(yaml, "parse", pure_python)
    monkeypatch.setattr(yaml, "safe_load", pure_python)
    monkeypatch.setattr(yaml.SafeLoader, "__init__", pure_python)
    reads = []
    real = specfile.exclusion_file_ids
    monkeypatch.setattr("robodata.curate.spec.exclusion_file_ids", lambda *a: reads.append(a) or real(*a))
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge(random_catalog(random.Random(3)))
    info, selection = curate(path, cat, tmp_path / "m")
    assert len(reads) == 1  # the hash and the predicate share one read
    spec = load_spec(path)
    assert spec.excluded_ids(tmp_path) == ["ep-00", "ep-01"]
    (tmp_path / "ids.txt").write_text("ep-02\n")  # a new version of the file is read again
    assert spec.excluded_ids(tmp_path) == ["ep-02"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: &a [x, *a]\nversion: 1\nname: x\n", "recursive"),
        ("version: 1\nname: x\nfilters: " + "[" * 40 + "]" * 40 + "\n", "nested more than"),
        ("version: 1\nname: x\nfilters: " + "[" * 2000 + "]" * 2000 + "\n", "nested more than"),
    ],
)
def test_hostile_documents_are_still_refused_before_they_are_built(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_spec(path)
