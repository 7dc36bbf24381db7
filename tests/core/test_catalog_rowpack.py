"""Row-major sidecars (robodata.catalog.rowpack): rows picked from several files come back exactly,
nulls included, in the order asked; a cut or tampered file is refused, never misread."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from robodata.catalog import rowpack, sidecar
from robodata.catalog.sidecar import PLAIN_SCHEMA, Sidecar

_text = st.one_of(st.none(), st.text(max_size=12))
_small = st.one_of(st.none(), st.sampled_from(["", "a", "b", "é", "x" * 40]))
_row = st.fixed_dictionaries(
    {
        "episode_id": _text,
        "uri": _text,
        "site": _small,
        "task": _small,
        "duration_s": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
        "num_frames": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
        "num_state_steps": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
        "cameras": st.one_of(st.none(), st.lists(st.one_of(st.none(), st.sampled_from(["c1", "c2", ""])), max_size=3)),
        "stream_rates_json": _small,
        "layout_version": _small,
        "size_bytes": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        "footer_offset": st.one_of(st.none(), st.integers(0, 2**40)),
        "footer_length": st.one_of(st.none(), st.integers(0, 2**20)),
    }
)


def _write(path: Path, rows: list[dict]) -> Sidecar:
    path.write_bytes(rowpack.encode(pa.Table.from_pylist(rows, schema=PLAIN_SCHEMA)))
    return Sidecar(path, len(rows), False, False)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


@seed(2028)
@settings(max_examples=60, deadline=None)
@given(files=st.lists(st.lists(_row, min_size=1, max_size=8), min_size=1, max_size=3), data=st.data())
def test_picked_rows_round_trip_exactly_in_the_order_asked(tmp_path_factory, files, data):
    folder = tmp_path_factory.mktemp("pack")
    cars = [_write(folder / f"{i}.rows", rows) for i, rows in enumerate(files)]
    picks, want = [], []
    for car, rows in zip(cars, files, strict=True):
        pos = sorted(data.draw(st.sets(st.integers(0, len(rows) - 1), max_size=len(rows))))
        picks.append((car, np.array(pos, dtype=np.int64)))
        want += [rows[p] for p in pos]
    order = np.array(data.draw(st.permutations(range(len(want)))), dtype=np.int64)
    got = sidecar.take_many(picks, order).to_pylist()
    assert len(got) == len(want)
    for g, j in zip(got, order, strict=True):
        w = want[j]
        assert all(_same(g[c], w[c]) for c in PLAIN_SCHEMA.names), (g, w)


def _one(tmp_path: Path) -> Sidecar:
    rows = [
        {"episode_id": f"ep-{i}", "uri": f"s3://b/ep-{i}.rdep", "site": "sfo", "task": "fold", "cameras": ["c1"]}
        for i in range(20)
    ]
    return _write(tmp_path / "a.rows", rows)


def test_a_cut_or_tampered_sidecar_is_refused(tmp_path):
    car = _one(tmp_path)
    good = car.path.read_bytes()
    (_, head_len) = struct.unpack_from("<8sQ", good)
    records_at = 16 + head_len
    id_offsets_at = records_at + json.loads(good[16:records_at])["sections"][0]
    rec = np.frombuffer(good, rowpack.RECORD, 20, records_at).copy()
    bad = rec.copy()
    bad["task"][7] = 5  # a code past its dictionary
    offsets = np.frombuffer(good, np.int64, 21, id_offsets_at).copy()
    cases = {
        "cut": good[: len(good) // 2],
        "empty": b"",
        "magic": b"X" + good[1:],
        "rows": good.replace(b'"rows":20', b'"rows":21'),
        "code": good[:records_at] + bad.tobytes() + good[records_at + bad.nbytes :],
    }
    for i, value in ((8, 10**9), (8, -5), (9, 0)):  # past the bytes, before them, backwards
        o = offsets.copy()
        o[i] = value
        cases[f"offset{i}={value}"] = good[:id_offsets_at] + o.tobytes() + good[id_offsets_at + o.nbytes :]
    for name, body in cases.items():
        car.path.write_bytes(body)
        with pytest.raises(ValueError):
            sidecar.take(car, np.arange(20))
        car.path.write_bytes(good)
        assert sidecar.take(car, np.arange(20)).num_rows == 20, name


def test_prune_removes_sidecars_of_an_older_format(tmp_path):
    folder = tmp_path / sidecar.SIDECAR_DIR
    folder.mkdir()
    (tmp_path / "day=1").mkdir()
    (tmp_path / "day=1" / "f.parquet").write_bytes(b"x")
    old = folder / "day%3D1%2Ff.parquet~1~20~LQ.arrow"
    new = folder / "day%3D1%2Ff.parquet~1~20~LQ.rows"
    old.write_bytes(b"x")
    new.write_bytes(b"x")
    assert sidecar.prune(str(tmp_path), {"day=1/f.parquet"}) == 1
    assert not old.exists() and new.exists()
