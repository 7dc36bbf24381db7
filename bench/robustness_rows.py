"""bench.robustness section "rows": manifests edited by a hostile editor (issue 44, items 5 and 6).

Each case takes a manifest over a few real small containers, edits some rows and re-hashes it
(as its editor can): a `stream_rates_json` that does not parse or lies, a row's uri, size and
footer hints swapped to another episode's, a uri on a loopback http:// server (or ftp://, ...),
every row moved to val/test. The loader (`PatternDataset.from_manifest` and a batch over every
sample), the MCAP export and the viewer (`open_row`, `draw_sample`) then read it.

Counted: `raw_errors` (exceptions outside RobodataError), `uri_mismatch_served` (samples, exported
episodes or viewer readers of an edited row served from another episode's container),
`http_requests_from_manifest` (requests the loopback server received), `bad_rows_skipped`
(edited rows the loader skipped and counted, with the manifest still served), and the catalog's
refusals of the same rows on merge.
"""

from __future__ import annotations

import http.server
import random
import shutil
import tempfile
import threading
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from bench.common import BENCH_DIR
from robodata.catalog.rows import CatalogError, conform
from robodata.catalog.schema import MANIFEST_SCHEMA
from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, Layout, StreamSpec, TopicGroup
from robodata.container.meta import VideoSettings
from robodata.curate.manifest import write_manifest
from robodata.curate.select import Selection
from robodata.errors import RobodataError

CASES = {"smoke": 8, "quick": 60, "full": 400}
EPISODES = 4
EDITS = ("rates", "swap", "foreign", "split", "mixed")
BAD_RATES = ["{not json", "[30.0]", '{"cam": "fast"}', '{"cam": -1}', '{"cam": NaN}', "null", '{"cam": 1e999}']
BAD_RATES.append("{" * 5000)  # nested past the JSON parser's recursion limit
FOREIGN = ["{base}/ep0.rdep", "{base}/ep1.rdep", "ftp://127.0.0.1:1/x.rdep", "memory://x.rdep", "https://127.0.0.1:1/x"]


class _Counting(http.server.SimpleHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.hits.append(self.path)
        super().do_GET()

    def do_HEAD(self) -> None:  # noqa: N802
        self.hits.append(self.path)
        super().do_HEAD()

    def log_message(self, *args: Any) -> None:
        pass


def _episodes(root: Path) -> list[dict[str, Any]]:
    rows = []
    for i in range(EPISODES):
        path = root / f"ep{i}.rdep"
        streams = {
            "cam": StreamSpec("cam", "video", 10.0, (16, 16, 3)),
            "joint_pos": StreamSpec("joint_pos", "array", 50.0, (7,)),
            "cmd": StreamSpec("cmd", "array", 50.0, (7,)),
        }
        cams = TopicGroup("cams", ("cam",), 1.0, VideoSettings(gop=10, crf=35))
        layout = Layout(groups=(cams, TopicGroup("p", ("joint_pos", "cmd"), 2.0)))
        with EpisodeWriter(path, EpisodeMeta(f"ep{i}", "r", "s", "t", 0, streams), layout) as w:
            for k in range(50):
                w.write_frame("cam", np.full((16, 16, 3), (4 * k + 40 * i) % 256, np.uint8), k * 100_000_000)
            t = np.arange(250) * 20_000_000
            w.write_array("joint_pos", t, np.full((250, 7), i, np.float32))
            w.write_array("cmd", t, np.full((250, 7), -i, np.float32))
        r = EpisodeReader.open(path)
        rows.append(
            {
                "episode_id": f"ep{i}",
                "uri": str(path),
                "site": "s",
                "task": "t",
                "duration_s": r.meta.duration_s,
                "num_frames": 50,
                "num_state_steps": 250,
                "cameras": ["cam"],
                "stream_rates_json": '{"cam": 10.0, "cmd": 50.0, "joint_pos": 50.0}',
                "layout_version": r.layout_version,
                "size_bytes": path.stat().st_size,
                "footer_offset": r.footer_offset,
                "footer_length": r.footer_length,
                "split": "train",
                "weight": 1.0 / EPISODES,
            }
        )
        r.close()
    return rows


def edit(rows: list[dict[str, Any]], how: str, base: str, rng: random.Random) -> tuple[list[dict], set[int], set[int]]:
    """(edited rows, rows swapped to another episode's container, rows with bad rates or uris)."""
    rows = [dict(r) for r in rows]
    swapped: set[int] = set()
    bad: set[int] = set()
    for k in rng.sample(range(len(rows)), rng.randint(1, 2)):
        kind = how if how != "mixed" else rng.choice(("rates", "swap", "foreign"))
        if kind == "rates":
            rows[k]["stream_rates_json"] = rng.choice(BAD_RATES)
            bad.add(k)
        elif kind == "swap":
            other = rows[(k + rng.randint(1, len(rows) - 1)) % len(rows)]
            for col in rng.choice([("uri",), ("uri", "size_bytes", "footer_offset", "footer_length")]):
                rows[k][col] = other[col]
            swapped.add(k)
        elif kind == "foreign":
            rows[k]["uri"] = rng.choice(FOREIGN).format(base=base)
            bad.add(k)
    if how == "split":
        for r in rows:
            r["split"] = rng.choice(["val", "test"])
    return rows, swapped, bad


def _manifest(rows: list[dict[str, Any]], folder: Path) -> str:
    frame = pl.from_arrow(pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA))
    assert isinstance(frame, pl.DataFrame)
    return str(write_manifest(Selection(frame, 1, "spec", {}), folder, "m").path)


class Counts:
    def __init__(self) -> None:
        self.c = {"raw_errors": 0, "uri_mismatch_served": 0, "bad_rows_skipped": 0, "refused": 0, "served": 0}
        self.c["catalog_refused_bad_rows"] = 0
        self.failures: list[str] = []

    def guard(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return fn(*args, **kw)
        except RobodataError:
            self.c["refused"] += 1
        except Exception as exc:  # noqa: BLE001 - what the bench counts
            self.c["raw_errors"] += 1
            if len(self.failures) < 10:
                self.failures.append(f"{what}: {type(exc).__name__}: {str(exc)[:160]}")
        return None


def run_case(path: str, rows: list[dict], swapped: set[int], bad: set[int], out: Path, counts: Counts) -> None:
    from robodata.dataset import PatternDataset
    from robodata.export.run import export
    from robodata.viz.select import SampleSpec, draw_sample, open_row

    c = counts.c
    ds = counts.guard("loader", PatternDataset.from_manifest, path, "wam")
    if ds is not None:
        batch = counts.guard("loader batch", lambda: ds.batch([ds.index.locate(i) for i in range(len(ds))]))
        if batch is not None:
            served = {int(i) for i in batch["episode_index"]}
            c["served"] += 1
            c["uri_mismatch_served"] += sum(1 for i in batch["episode_index"] if int(i) in swapped)
            c["bad_rows_skipped"] += len((bad | swapped) - served)
    result = counts.guard("export", export, path, out / "mcap", "mcap")
    if result is not None:
        c["uri_mismatch_served"] += len(swapped)  # an export of every row went through
    for k in sorted(swapped | bad)[:1]:
        reader = counts.guard("view --index", open_row, path, k, None)
        if reader is not None and reader.meta.episode_id != rows[k]["episode_id"]:
            c["uri_mismatch_served"] += 1
    drawn = counts.guard("view --sample", draw_sample, path, SampleSpec("wam", 0))
    if drawn is not None and drawn.row in swapped:
        c["uri_mismatch_served"] += 1
    start = datetime(2024, 1, 1, tzinfo=UTC)
    catalog = [
        {**{k: v for k, v in r.items() if k not in ("split", "weight")}, "qc_status": "pass", "start_time": start}
        for r in rows
    ]
    try:
        conform(catalog)
    except CatalogError:
        c["catalog_refused_bad_rows"] += 1 if bad else 0


def run(size: str) -> dict[str, Any]:
    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="robust-rows-", dir=BENCH_DIR))
    handler: type[_Counting] = type("H", (_Counting,), {"hits": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(work / "eps")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    counts = Counts()
    rng = random.Random(44)
    with_bad = 0
    try:
        (work / "eps").mkdir()
        rows = _episodes(work / "eps")
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for i in range(CASES[size]):
            how = EDITS[i % len(EDITS)]
            edited, swapped, bad = edit(rows, how, base, rng)
            with_bad += bool(bad)
            case = work / f"c{i}"
            case.mkdir()
            run_case(_manifest(edited, case), edited, swapped, bad, case, counts)
            shutil.rmtree(case, ignore_errors=True)
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "cases": CASES[size],
        **counts.c,
        "cases_with_bad_rows": with_bad,
        "http_requests_from_manifest": len(handler.hits),
        "failures": counts.failures,
    }
