"""Row-major sidecars (robodata.catalog.rowpack): rows picked from several files come back exactly,
nulls included, in the order asked; a cut or tampered file is refused, never misread."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from unittest import mock

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
    old = [folder / f"day%3D1%2Ff.parquet~1~20~LQ.{suffix}" for suffix in ("arrow", "rows", "rows3", "rows4")]
    new = folder / f"day%3D1%2Ff.parquet~1~20~LQ{sidecar.SUFFIX}"
    for path in (*old, new):
        path.write_bytes(b"x")
    assert sidecar.prune(str(tmp_path), {"day=1/f.parquet"}) == 4  # formats 1 to 4
    assert not any(path.exists() for path in old) and new.exists()


@pytest.mark.parametrize("order_salt", ["s/budget", "other/budget"])
def test_ids_are_hashed_only_for_their_data_file_and_as_written(tmp_path, order_salt):
    from robodata.curate.stablehash import stable_hash64_py

    rows = [{"episode_id": f"ep-{i:04d}", "uri": f"s3://b/{i}"} for i in range(30)]
    path = tmp_path / "a.rows"
    image = rowpack.encode(pa.Table.from_pylist(rows, schema=PLAIN_SCHEMA), footer_crc=1234, order_salt=order_salt)
    path.write_bytes(image)
    at = np.array([29, 0, 7, 7])
    want = [stable_hash64_py(f"ep-{i:04d}", "s/budget") for i in at]
    f = rowpack.RowFile(path, 30)
    try:  # stored (the file's salt) or from the ids (another salt): the same hashes
        assert f.hash_ids(at, "s/budget", 1234).tolist() == want
        with pytest.raises(ValueError, match="another data file"):
            f.hash_ids(at, "s/budget", 1235)
        with pytest.raises(ValueError, match="outside its 30 rows"):
            f.hash_ids(np.array([30]), "s/budget", 1234)
    finally:
        f.close()
    (_, head_len) = struct.unpack_from("<8sQ", image)
    sizes = json.loads(image[16 : 16 + head_len])["sections"]
    hashes_at = 16 + head_len + sum(sizes[:6])

    def flipped(at: int) -> bytes:
        return image[:at] + bytes([image[at] ^ 1]) + image[at + 1 :]

    altered = {  # an id (its offsets unchanged), a stored hash, a slot
        "id": image.replace(b"ep-0007", b"ep-9007"),
        "hash": flipped(hashes_at),
        "slot": flipped(hashes_at - sizes[5]),
    }
    for name, body in altered.items():
        path.write_bytes(body)
        f = rowpack.RowFile(path, 30)
        try:
            if name == "id" and order_salt == "s/budget":  # the hashes are stored: the ids are not read
                assert f.hash_ids(at, "s/budget", 1234).tolist() == want
            else:
                with pytest.raises(ValueError, match="not as written"):
                    f.hash_ids(at, "s/budget", 1234)
        finally:
            f.close()


def test_records_lie_in_the_salts_hash_order_and_are_picked_by_row_number(tmp_path):
    """A budget keeps a prefix of the hash order: those rows' records are the first ones."""
    from robodata.curate.stablehash import stable_hash64_py

    rows = [{"episode_id": f"ep-{i:04d}", "uri": f"s3://b/{i}"} for i in range(200)]
    car = Sidecar(tmp_path / "a.rows", 200, False, False)
    car.path.write_bytes(rowpack.encode(pa.Table.from_pylist(rows, schema=PLAIN_SCHEMA), order_salt="s/budget"))
    hashes = np.array([stable_hash64_py(r["episode_id"], "s/budget") for r in rows], dtype=np.uint64)
    f = rowpack.RowFile(car.path, 200)
    try:
        first = np.argsort(hashes, kind="stable")[:20]  # the 20 rows a budget takes first
        slots = f._slot(first)
        assert sorted(slots.tolist()) == list(range(20))
        assert [r.as_py() for r in f.pick(first).strings["episode_id"]] == [rows[i]["episode_id"] for i in first]
        for limit in (0, int(hashes[first[-1]]), 2**63, 2**64 - 1):  # the rows under it, in hash order
            got, h = f.prefix(limit, 0)
            want = [int(i) for i in np.argsort(hashes, kind="stable") if int(hashes[i]) <= limit]
            assert got.tolist() == want and h.tolist() == [int(hashes[i]) for i in want]
        with pytest.raises(ValueError, match="another data file"):
            f.prefix(2**63, 1)
    finally:
        f.close()
    assert sidecar.take(car, np.array([5, 150, 0])).column("uri").to_pylist() == ["s3://b/5", "s3://b/150", "s3://b/0"]


def test_footer_checksum_names_one_parquet_file(tmp_path):
    import pyarrow.parquet as pq

    table = pa.table({"a": [1, 2, 3]})
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.slice(1), tmp_path / "b.parquet")
    a, b = rowpack.footer_crc32c(tmp_path / "a.parquet"), rowpack.footer_crc32c(tmp_path / "b.parquet")
    assert a != b and a == rowpack.footer_crc32c(tmp_path / "a.parquet")
    (tmp_path / "c.parquet").write_bytes((tmp_path / "a.parquet").read_bytes()[:-3])
    with pytest.raises(ValueError, match="not a Parquet file"):
        rowpack.footer_crc32c(tmp_path / "c.parquet")


@seed(2029)
@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 300), limits=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=6))
def test_prefixes_across_blocks_are_the_rows_under_the_limit(tmp_path_factory, n, limits):
    """Blocks of 16 records (the size is the file's, from its header): any limit gives exactly the
    rows whose hash is <= it, in hash order, whatever block the search starts from."""
    from robodata.curate.stablehash import stable_hash64_py

    rows = [{"episode_id": f"e{i}", "uri": f"u{i}"} for i in range(n)]
    path = tmp_path_factory.mktemp("blocks") / "a.rows"
    with mock.patch.object(rowpack, "BLOCK", 16):
        path.write_bytes(rowpack.encode(pa.Table.from_pylist(rows, schema=PLAIN_SCHEMA), order_salt="x"))
    hashes = [stable_hash64_py(r["episode_id"], "x") for r in rows]
    order = sorted(range(n), key=lambda i: (hashes[i], i))
    f = rowpack.RowFile(path, n)
    try:
        for limit in [*limits, *(hashes[i] for i in order[:: max(1, n // 5)])]:
            got, h = f.prefix(limit, 0)
            want = [i for i in order if hashes[i] <= limit]
            assert got.tolist() == want and h.tolist() == [hashes[i] for i in want]
        if n:
            at = np.arange(n)[::-1]
            assert f.hash_ids(at, "x", 0).tolist() == [hashes[i] for i in at]
    finally:
        f.close()
