import json

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.launches import BatchPolicy, LaunchState, cut_batches, tick
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.landing.stagger import StaggerPolicy
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.tables import IngestPaths
from robodata.ingest.topics import TopicRule
from tests.core.helpers_ingest import malformed_landing


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    d = tmp_path_factory.mktemp("ing")
    cases = malformed_landing(d / "landing")
    items = new_items(str(d / "landing"), LandingCursor())
    paths = IngestPaths(str(d / "state"))
    s = IngestSettings(
        workers=2,
        topics=(TopicRule("/gripper/force", "array", stream="gripper_force", field="data"),),
    )
    write_manifest(paths, "b1", items)
    out = run_batch(paths, "b1", s)
    return d, s, cases, out


def _qc(root, stage="summary"):
    t = DeltaTable(IngestPaths(root).table("qc_results")).to_pyarrow_table()
    return [r for r in t.to_pylist() if r["stage"] == stage]


def test_malformed_inputs_quarantine_only_themselves(ingested):
    d, s, cases, out = ingested
    summary = {r["uri"].rsplit("/", 1)[-1]: r for r in _qc(str(d / "state"))}
    assert len(summary) == 7
    for good in ("good_a", "good_b", "mcap_good"):
        assert summary[cases[good]]["passed"], summary[cases[good]]
    reasons = {k: summary[cases[k]]["reason"] for k in ("bad_jpeg", "backwards", "mcap_truncated")}
    assert not any(summary[cases[k]]["passed"] for k in reasons)
    assert "not a decodable JPEG" in reasons["bad_jpeg"]
    assert "timestamps_monotonic" in reasons["backwards"] and "non-increasing" in reasons["backwards"]
    assert "truncated or corrupt MCAP" in reasons["mcap_truncated"]
    unknown = summary[cases["mcap_unknown"]]  # non-blocking by default: converted, with a warning
    assert unknown["passed"] and "/mystery" in unknown["reason"] and unknown["score"] < 1.0
    assert out["episodes"]["converted"] == 4 and out["episodes"]["skipped_quarantined"] == 2


def test_catalog_rows_follow_schema_and_rerun_is_idempotent(ingested):
    d, s, cases, out = ingested
    paths = IngestPaths(str(d / "state"))
    cat = DeltaTable(paths.catalog).to_pyarrow_table()
    assert cat.schema.names == CATALOG_SCHEMA.names
    assert cat.num_rows == 7
    ok = cat.filter(pc.equal(cat.column("qc_status"), "pass")).to_pylist()
    assert len(ok) == 4 and all(
        r["uri"].endswith(".rdep") and r["footer_length"] > 0 and r["num_frames"] == 20 for r in ok
    )
    assert {r["ingest_batch"] for r in ok} == {"b1"} and all(json.loads(r["stream_rates_json"]) for r in ok)
    assert (out["episode_metadata"]["inserted"], out["episode_metadata"]["updated"]) == (7, 0)
    again = run_batch(paths, "b1", s, derived=False)  # re-run: rows replaced per batch, merged by key, never duplicated
    assert (again["episode_metadata"]["inserted"], again["episode_metadata"]["updated"]) == (0, 7)
    assert DeltaTable(paths.catalog).to_pyarrow_table().num_rows == 7
    assert len(_qc(paths)) == 7
    seg = DeltaTable(paths.table("segments")).to_pyarrow_table().to_pylist()
    assert {"approach", "manipulate", "retreat"} <= {r["label"] for r in seg}


def test_qc_selection_per_vendor_changes_what_blocks(ingested, tmp_path):
    d, s, cases, out = ingested
    paths = IngestPaths(str(tmp_path / "state"))
    s2 = IngestSettings(
        qc=s.qc.__class__(
            by_vendor={"inhouse": ("readable", "rate_within_tolerance")}, blocking=("readable", "converted")
        ),
    )
    items = [i for i in new_items(str(d / "landing"), LandingCursor()) if i.name == cases["backwards"]]
    write_manifest(paths, "b2", items)
    run_batch(paths, "b2", s2, derived=False)
    (row,) = _qc(paths)
    checks = {r["check"] for r in _qc(paths, "pre")}
    assert "timestamps_monotonic" not in checks and "rate_within_tolerance" in checks
    assert not row["passed"] and "converted" in row["reason"]  # the writer refuses time going back


def test_landing_cursor_batches_and_stagger(ingested, tmp_path):
    d, s, cases, out = ingested
    state = LaunchState()
    paths = IngestPaths(str(tmp_path / "st"))
    pol = StaggerPolicy(max_concurrent=2, run_s=10.0, jitter=0.5, seed=1)
    bp = BatchPolicy(max_items=3, settle_s=0.0)
    t1 = tick(state, str(d / "landing"), paths, bp, pol, now=2e9)
    assert t1.items == 7 and len(t1.new_batches) == 3
    launched = list(t1.launch)
    for dt, total in ((2.6, 1), (4.9, 1), (7.6, 2), (12.6, 3)):  # slot 5 s, jitter up to 2.5 s
        t = tick(state, str(d / "landing"), paths, bp, pol, now=2e9 + dt)
        assert t.items == 0  # nothing relisted
        launched += t.launch
        assert len(launched) == total, (dt, launched)
    assert launched == t1.new_batches
    restored = LaunchState()
    restored.load_state_dict(json.loads(json.dumps(state.state_dict())))
    assert restored.pending == state.pending and restored.landing.watermark == state.landing.watermark
    assert [len(b) for b in cut_batches(new_items(str(d / "landing"), LandingCursor()), BatchPolicy(max_items=3))] == [
        3,
        3,
        1,
    ]


def test_landing_zone_on_s3(tmp_path):
    import fsspec

    from robodata.ingest.synth import SynthConfig, synthesize
    from tests.core.s3_server import moto_s3

    local = tmp_path / "land"
    synthesize(SynthConfig(episodes=2, duration_s=0.5, height=32, width=32, fps=5.0, state_hz=20.0), local)
    with moto_s3() as s3:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=s3["endpoint_url"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket="land-bucket")
        fs = fsspec.filesystem("s3", **s3["storage_options"])
        fs.put(str(local) + "/", "land-bucket/landing/", recursive=True)
        items = new_items("s3://land-bucket/landing", LandingCursor(), storage_options=s3["storage_options"])
        assert [i.kind for i in items] == ["legacy-jpeg"] * 2
        assert all(i.uri.startswith("s3://land-bucket/landing/") and i.size_bytes > 1000 for i in items)
        cur = LandingCursor()
        cur.advance(items)
        assert new_items("s3://land-bucket/landing", cur, storage_options=s3["storage_options"]) == []


def test_parallel_alignment_matches_serial(tmp_path):
    from robodata.ingest.steps.aligned_tracks import align_batch
    from robodata.ingest.steps.raw_episodes import observe
    from robodata.ingest.synth import SynthConfig, synthesize
    from robodata.ingest.tables import read_batch

    synthesize(SynthConfig(episodes=8, duration_s=0.6, height=16, width=16, fps=5.0, state_hz=10.0), tmp_path / "land")
    items = new_items(str(tmp_path / "land"), LandingCursor())
    got = {}
    for workers in (1, 2):
        paths = IngestPaths(str(tmp_path / f"st{workers}"))
        s = IngestSettings(workers=workers)
        write_manifest(paths, "b", items)
        observe(paths, "b")
        assert align_batch(paths, "b", s)["aligned"] == 8
        t = read_batch(paths.table("aligned_tracks"), "b", ["uri", "alignment_json", "decoded_bytes"])
        got[workers] = sorted(zip(*[t.column(c).to_pylist() for c in t.column_names], strict=True))
    assert got[1] == got[2]


def test_landing_scan_sizes_only_items_the_cursor_has_not_passed(tmp_path, monkeypatch):
    """A landing zone keeps what it has ingested; each tick must not re-size every old item
    (a recursive listing per item on S3). Items completed before the watermark are skipped
    before `du`; the one completed after it is found and sized as before."""
    import os

    import fsspec.implementations.local as local_fs

    from robodata.ingest.synth import SynthConfig, synthesize

    land = tmp_path / "land"
    old = synthesize(SynthConfig(episodes=2, duration_s=0.5, height=16, width=16, fps=5.0, state_hz=10.0), land)
    for i, ep in enumerate(old):
        os.utime(ep / "_COMPLETE", (1_000 + i, 1_000 + i))
    cur = LandingCursor()
    cur.advance(new_items(str(land), cur))
    assert cur.watermark == 1_001
    new = synthesize(
        SynthConfig(episodes=1, duration_s=0.5, height=16, width=16, fps=5.0, state_hz=10.0, seed=9, site="other"), land
    )[0]
    sized = []
    real_du = local_fs.LocalFileSystem.du
    monkeypatch.setattr(
        local_fs.LocalFileSystem, "du", lambda self, path, *a, **k: sized.append(path) or real_du(self, path, *a, **k)
    )
    items = new_items(str(land), cur)
    assert [it.name for it in items] == [new.name] and items[0].size_bytes > 0
    # Only the item at the watermark instant is sized besides the new one (its name decides).
    assert sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in sized) == sorted([new.name, old[1].name])
