"""The worker pool: every job gets exactly one row, jobs go out in the given order, and a
worker that dies mid-job costs that job only (a replacement finishes the queue)."""

from __future__ import annotations

from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.settings import IngestSettings
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.workers.binpack import list_schedule, lpt_order
from robodata.ingest.workers.dispatch import run_pool


def _jobs(tmp_path, n=6):
    synthesize(SynthConfig(episodes=n, duration_s=0.5, height=16, width=16, fps=5.0, state_hz=10.0), tmp_path / "land")
    return [
        {"uri": it.uri, "kind": it.kind, "size_bytes": it.size_bytes}
        for it in sorted(new_items(str(tmp_path / "land"), LandingCursor()), key=lambda it: it.uri)
    ]


def test_one_worker_takes_jobs_in_order_and_rows_come_back_for_all(tmp_path):
    jobs = _jobs(tmp_path, 4)
    rows = run_pool(jobs, 1, IngestSettings().to_dict(), stage="align")
    assert [r["uri"] for r in rows] == [j["uri"] for j in jobs]
    assert all(r["ok"] for r in rows)


def test_a_worker_crash_fails_only_its_job_and_the_queue_still_drains(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBODATA_SCRATCH", str(tmp_path / "scratch"))
    jobs = _jobs(tmp_path, 6)
    del jobs[1]["size_bytes"]  # the worker itself raises KeyError on this job and exits
    rows = run_pool(jobs, 2, IngestSettings().to_dict(), stage="align")
    assert sorted(r["uri"] for r in rows) == sorted(j["uri"] for j in jobs)
    bad = [r for r in rows if not r["ok"]]
    assert [r["uri"] for r in bad] == [jobs[1]["uri"]]
    assert "exited with code 1" in bad[0]["error"] and "KeyError" in bad[0]["error"]
    assert sum(r["ok"] for r in rows) == 5
    assert list((tmp_path / "scratch").iterdir()) == []  # the pool's own scratch folder is gone


def test_list_schedule_replays_pull_dispatch():
    sizes = [5.0, 1.0, 4.0, 3.0, 3.0, 2.0]
    order = lpt_order(sizes)
    assert order == [0, 2, 3, 4, 5, 1]
    bins = list_schedule([sizes[i] for i in order], 2)
    loads = sorted(sum(sizes[order[k]] for k in b) for b in bins)
    assert loads == [9.0, 9.0]  # 5+3+1 and 4+3+2


def test_settings_reach_a_worker_as_they_were():
    """IngestSettings owns its serialization: what a worker process rebuilds equals what was sent."""
    from robodata.container.meta import VideoSettings
    from robodata.ingest.topics import TopicRule
    from robodata.ingest.video_copy import VideoCopyConfig

    s = IngestSettings(
        workers=3,
        decode_threads=0,
        video=VideoSettings(crf=30, threads=1),
        topics=(TopicRule("/cam/*", "video", "front"),),
        unknown_topics="ignore",
        video_copy=VideoCopyConfig(mode="transcode"),
    )
    d = s.to_dict()
    import json

    assert json.loads(json.dumps(d)) == d  # JSON-safe: it crosses a process boundary as JSON
    assert IngestSettings.from_dict(d) == s
    assert IngestSettings.from_dict(d) != IngestSettings()
