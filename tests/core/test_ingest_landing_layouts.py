"""Landing zones as users fill them: HDF5 demos at the file's root, Git LFS pointers instead of
recordings, hidden entries, a dataset folder given as the landing zone, and a run that converts
nothing (issue 36 item 8). Every entry becomes an item or a row with its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from robodata.ingest import formats
from robodata.ingest.importers import open_raw
from robodata.ingest.landing.scan import scan
from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps.aligned_tracks import align_one
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.synth.lerobot import write_lerobot

TINY = dict(duration_s=0.6, height=32, width=48, fps=10.0, state_hz=20.0, cameras=("cam",))
POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 1234567\n"


def _rows(land: Path, tmp: Path) -> dict[str, dict]:
    s = IngestSettings()
    return {it.name: align_one(it.uri, it.kind, s) | {"kind": it.kind} for it in scan(str(land))}


def test_hdf5_demo_groups_at_the_root_are_one_item_each(tmp_path):
    land = tmp_path / "land"
    path = synthesize(SynthConfig(episodes=2, format="hdf5-robomimic", **TINY), land)[0]  # type: ignore[arg-type]
    with h5py.File(path, "r+") as f:  # as some exporters write it: no data/ group
        for k in list(f["data"]):
            f.move(f"data/{k}", k)
        for k, v in f["data"].attrs.items():
            f.attrs[k] = v
        del f["data"]
    items = sorted(scan(str(land)), key=lambda it: it.uri)
    assert [it.uri.rsplit("#", 1)[1] for it in items] == ["demo_0", "demo_1"]
    with h5py.File(path) as f:
        for it in items:
            raw = open_raw(it.uri, it.kind)
            group = f[it.uri.rsplit("#", 1)[1]]
            assert np.array_equal(raw.arrays["cmd"].values, group["actions"][()].astype(np.float32))


def test_git_lfs_pointers_are_named_as_such(tmp_path):
    land = tmp_path / "land"
    land.mkdir()
    (land / "run1.mcap").write_text(POINTER.format("a" * 64))  # claimed by suffix, but a pointer
    (land / "calib.bin").write_text(POINTER.format("b" * 64))  # claimed by nothing
    ds = write_lerobot(land / "lfs_ds", "v2.1", episodes=1, frames_per_episode=4, height=32, width=48)
    for p in ds.rglob("*.parquet"):  # a clone without `git lfs pull`: meta/ is text, the data are pointers
        p.write_text(POINTER.format("c" * 64))
    rows = _rows(land, tmp_path)
    for name in ("run1.mcap", "calib.bin", "lfs_ds#000000"):
        r = rows[name]
        assert not r["ok"] and "Git LFS pointer" in r["error"] and "truncated" not in r["error"], r
    assert "sha256:" + "a" * 64 in rows["run1.mcap"]["error"] and "1234567 bytes" in rows["run1.mcap"]["error"]
    assert "git lfs pull" in rows["lfs_ds#000000"]["error"]


def test_hidden_entries_are_rows_with_their_reason(tmp_path):
    land = tmp_path / "land"
    synthesize(SynthConfig(episodes=1, format="mcap", **TINY), land)  # type: ignore[arg-type]
    (land / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (land / ".episode_2.mcap.Xa81f").write_bytes(b"rsync temporary")
    (land / ".cache").mkdir()
    rows = _rows(land, tmp_path)
    assert len(rows) == 4
    for name in (".DS_Store", ".episode_2.mcap.Xa81f", ".cache"):
        r = rows[name]
        assert r["kind"] == formats.UNRECOGNIZED and r["failed_check"] == "recognized"
        assert "hidden landing entry" in r["error"], r


def test_a_dataset_folder_given_directly_is_recognized_and_its_parts_point_at_it(tmp_path):
    ds = write_lerobot(tmp_path / "land" / "so100_pick", "v3.0", episodes=2, frames_per_episode=4, height=32, width=48)
    items = sorted(scan(str(ds)), key=lambda it: it.uri)
    assert [(it.uri, it.kind) for it in items] == [(f"{ds}#0", "lerobot-v3.0"), (f"{ds}#1", "lerobot-v3.0")]
    rows = _rows(ds / "meta", tmp_path)  # meta/ itself given: every entry a row saying where to point
    assert rows and all("part of the LeRobot recording" in r["error"] and str(ds) in r["error"] for r in rows.values())


def test_ingest_exits_non_zero_when_items_were_found_and_none_passed(tmp_path):
    from robodata.cli import app

    land = tmp_path / "land"
    land.mkdir()
    (land / "flight.ulg").write_bytes(b"ULog")
    base = ["ingest", str(land), "--root", str(tmp_path / "s"), "-q"]
    res = CliRunner().invoke(app, [*base, "--batch", "b1"])
    assert res.exit_code == 1 and "none passed" in res.output, res.output
    assert json.loads(res.output.strip().splitlines()[0])["qc_results"]["passed"] == 0
    res = CliRunner().invoke(app, [*base, "--batch", "b2", "--allow-none"])
    assert res.exit_code == 0, res.output
    shutil.rmtree(land)
    land.mkdir()
    res = CliRunner().invoke(app, [*base, "--batch", "b3"])  # nothing found: nothing to fail
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=lambda f: f.kind)
def test_every_format_is_one_registry_entry_whose_synth_writer_it_claims(fmt, tmp_path):
    """The registry is the one place a format is declared: what its synth writers land is claimed
    by it (scan) and opens by its opener."""
    for name in fmt.synth:
        land = tmp_path / name
        synthesize(SynthConfig(episodes=1, format=name, **TINY), land)  # type: ignore[arg-type]
        items = list(scan(str(land)))
        assert items and all(fmt.holds(it.kind) and formats.of(it.kind) is fmt for it in items), items
        assert fmt.fragments or not any("#" in it.uri for it in items)  # only fragment formats split
        msgs = land.parent / f"{land.name}-msgs"
        from robodata.ingest.importers import ImportOptions

        opts = ImportOptions(msgs=str(msgs)) if msgs.exists() else None
        raw = open_raw(items[0].uri, items[0].kind, options=opts)
        assert raw.episode_id and raw.source == items[0].kind  # the importer's kind is its entry's
        if fmt.whole is not None:  # its completion check: the file as written is whole, a cut copy is not
            base = Path(fmt.split(items[0].uri)[0])
            with open(base, "rb") as f:
                assert fmt.whole(f, base.stat().st_size)
            cut = base.read_bytes()[: base.stat().st_size // 2]
            (tmp_path / "cut").write_bytes(cut)
            with open(tmp_path / "cut", "rb") as f:
                assert not fmt.whole(f, len(cut))


KINDS = {f.kind for f in formats.FORMATS}
SRC = Path(__file__).resolve().parents[2] / "src"


def _kind_literals(path: Path) -> list[str]:
    """String constants of `path` that spell a format's kind (or start a versioned one), except a
    key map's own name (`KeyMap("rlds", ...)`: the built-in map named after its format)."""
    import ast

    tree = ast.parse(path.read_text())
    names = {
        id(c.args[0])
        for c in ast.walk(tree)
        if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "KeyMap" and c.args
    }
    return [
        f"{path.relative_to(SRC)}:{n.lineno}: {n.value!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and id(n) not in names
        and (n.value in KINDS or any(n.value.startswith(k + "-v") or n.value == k + "-" for k in KINDS))
    ]


def test_no_kind_string_outside_the_registry():
    """A format is one module: ingestion spells no kind outside robodata.ingest.formats and the leaf
    it builds its entries on, robodata.ingest.format_kinds (importers take theirs from there, the
    settle logic asks the entry whether a file is whole)."""
    ingest = SRC / "robodata" / "ingest"
    leaf = ingest / "format_kinds.py"
    assert _kind_literals(leaf)
    found = [
        hit for p in sorted(ingest.rglob("*.py")) if "formats" not in p.parts and p != leaf for hit in _kind_literals(p)
    ]
    assert found == []
