"""Issue 24: landing items are identified by content digest (an unchanged item is not re-ingested),
and a re-ingest that supersedes a container deletes the old one only after the catalog commit."""

from pathlib import Path

import polars as pl
import pytest

from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.dedup import item_digest, not_cataloged
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.tables import IngestPaths

SMALL = dict(duration_s=1.0, height=32, width=32, fps=10.0, state_hz=50.0, cameras=("cam",))


@pytest.fixture()
def landed(tmp_path):
    land = tmp_path / "land"
    synthesize(SynthConfig(episodes=2, format="mcap", **SMALL), land)
    paths = IngestPaths(str(tmp_path / "state"))
    s = IngestSettings()
    items = new_items(str(land), LandingCursor())
    write_manifest(paths, "b1", items)
    run_batch(paths, "b1", s)
    return land, s, paths, items


def _catalog(paths) -> pl.DataFrame:
    return pl.read_delta(paths.catalog).sort("episode_id")


def test_unchanged_content_is_known_whatever_its_path_or_mtime(landed, tmp_path):
    land, s, paths, items = landed
    d = not_cataloged(items, paths.catalog)
    assert d.fresh == [] and len(d.known) == 2
    assert set(_catalog(paths)["source_digest"].to_list()) == set(d.digests.values())
    # the same bytes under another name and a new mtime are still known; changed bytes are fresh
    moved = land / "renamed.mcap"
    first = Path(items[0].uri)
    moved.write_bytes(first.read_bytes())
    first.write_bytes(first.read_bytes() + b"\0")
    again = new_items(str(land), LandingCursor())
    d = not_cataloged(again, paths.catalog)
    assert [i.uri for i in d.fresh] == [items[0].uri]
    assert {i.uri for i, _ in d.known} == {str(moved), items[1].uri}
    assert item_digest(str(moved), "mcap") != item_digest(items[0].uri, "mcap")


def test_a_reingest_deletes_the_superseded_container_after_the_commit_only(landed, monkeypatch):
    land, s, paths, items = landed
    old = _catalog(paths)["uri"].to_list()
    assert all(Path(u).exists() for u in old)
    write_manifest(paths, "b2", items)
    import robodata.ingest.steps.episode_metadata as em

    real = em.merge_episodes

    def failing(*a, **k):
        raise RuntimeError("commit failed")

    monkeypatch.setattr(em, "merge_episodes", failing)
    with pytest.raises(RuntimeError):
        run_batch(paths, "b2", s)
    assert all(Path(u).exists() for u in old)  # no commit: nothing deleted
    monkeypatch.setattr(em, "merge_episodes", real)
    run_batch(paths, "b2", s)
    new = _catalog(paths)["uri"].to_list()
    assert all("/b2/" in u and Path(u).exists() for u in new)
    assert not any(Path(u).exists() for u in old)  # superseded, deleted after the commit
    run_batch(paths, "b2", s)  # the same batch again: same containers, nothing deleted
    assert all(Path(u).exists() for u in new)


def test_a_digest_never_reads_through_a_symlink(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"secret-1")
    item = tmp_path / "land" / "ep"
    item.mkdir(parents=True)
    (item / "_COMPLETE").write_text("")
    (item / "link.bin").symlink_to(outside)
    before = item_digest(str(item), "legacy-jpeg")
    outside.write_bytes(b"secret-2")  # the target changes: the digest does not (it was never read)
    assert item_digest(str(item), "legacy-jpeg") == before
    (tmp_path / "land" / "top").symlink_to(item)
    with pytest.raises(OSError, match="symlink"):
        item_digest(str(tmp_path / "land" / "top"), "legacy-jpeg")


def test_a_sensor_tick_without_a_cursor_cuts_no_batch_for_cataloged_content(landed):
    """`make demo` then the landing sensor: its first tick (no cursor) lists every item, passes
    over the ones whose content is cataloged, and still moves its cursor past them."""
    from robodata.ingest.landing.launches import BatchPolicy, LaunchState, tick
    from robodata.ingest.landing.stagger import StaggerPolicy

    land, s, paths, items = landed
    state = LaunchState()
    t = tick(state, str(land), paths, BatchPolicy(settle_s=0.0), StaggerPolicy(run_s=0.0))
    assert (t.items, t.already_cataloged, t.new_batches) == (2, 2, [])
    assert all(not state.landing.is_new(it) for it in items)
    # a recording with new content in the same landing zone is cut into a batch
    synthesize(SynthConfig(episodes=1, format="mcap", seed=7, **SMALL), land / "later")
    t = tick(state, str(land / "later"), paths, BatchPolicy(settle_s=0.0), StaggerPolicy(run_s=0.0))
    assert (t.items, t.already_cataloged, len(t.new_batches)) == (1, 0, 1)


def test_the_sensor_hands_its_digests_to_alignment_which_reads_no_item_again(tmp_path, monkeypatch):
    """The landing tick digests each new item to compare with the catalog; the digest travels in the
    batch manifest and raw_episodes, and align_batch records it without reading the item again."""
    from robodata.ingest.landing.batch import read_manifest
    from robodata.ingest.landing.launches import BatchPolicy, LaunchState, tick
    from robodata.ingest.landing.stagger import StaggerPolicy
    from robodata.ingest.steps import aligned_tracks
    from robodata.ingest.steps.raw_episodes import observe

    land = tmp_path / "land"
    synthesize(SynthConfig(episodes=2, format="mcap", **SMALL), land)
    paths = IngestPaths(str(tmp_path / "state"))
    s = IngestSettings()
    t = tick(LaunchState(), str(land), paths, BatchPolicy(settle_s=0.0), StaggerPolicy(run_s=0.0))
    (batch,) = t.new_batches
    items = read_manifest(paths, batch)
    assert len(items) == 2 and all(it.digest == item_digest(it.uri, it.kind) for it in items)

    def no_second_read(*a, **k):
        raise AssertionError("alignment read an item again for its digest")

    monkeypatch.setattr(aligned_tracks, "item_digest", no_second_read)
    observe(paths, batch)
    aligned_tracks.align_batch(paths, batch, s)
    rows = paths.read("aligned_tracks", batch, ["uri", "source_digest"]).to_pylist()
    assert {r["uri"]: r["source_digest"] for r in rows} == {it.uri: it.digest for it in items}
