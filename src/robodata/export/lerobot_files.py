"""The files of a LeRobot v3.0 export besides its data and episodes tables: per-feature statistics,
tasks.parquet as pandas writes it, and one constant-rate MP4 per camera."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robodata.codecs.video import yuv420p_frame


class Stats:
    """Running min/max/mean/std per feature (vector features, or per channel for images)."""

    def __init__(self) -> None:
        self.n: dict[str, int] = {}
        self.s: dict[str, np.ndarray] = {}
        self.ss: dict[str, np.ndarray] = {}
        self.lo: dict[str, np.ndarray] = {}
        self.hi: dict[str, np.ndarray] = {}

    def add(self, key: str, x: np.ndarray) -> None:
        x = x.astype(np.float64).reshape(len(x), -1)
        if key not in self.n:
            self.n[key], self.s[key], self.ss[key] = 0, np.zeros(x.shape[1]), np.zeros(x.shape[1])
            self.lo[key], self.hi[key] = np.full(x.shape[1], np.inf), np.full(x.shape[1], -np.inf)
        self.n[key] += len(x)
        self.s[key] += x.sum(0)
        self.ss[key] += (x * x).sum(0)
        self.lo[key] = np.minimum(self.lo[key], x.min(0))
        self.hi[key] = np.maximum(self.hi[key], x.max(0))

    def get(self, key: str, image: bool = False) -> dict[str, Any]:
        n = self.n[key]
        mean = self.s[key] / n
        std = np.sqrt(np.maximum(self.ss[key] / n - mean * mean, 0.0))

        def shape(v: np.ndarray) -> list:
            return v.reshape(3, 1, 1).tolist() if image else v.tolist()

        return {
            "min": shape(self.lo[key]),
            "max": shape(self.hi[key]),
            "mean": shape(mean),
            "std": shape(std),
            "count": [n],
        }


def write_tasks(path: Path, tasks: dict[str, int]) -> None:
    """tasks.parquet as pandas writes it: `task` is the index, `task_index` the column."""
    names = sorted(tasks, key=lambda n: tasks[n])
    table = pa.table({"task_index": pa.array([tasks[n] for n in names], pa.int64()), "task": pa.array(names)})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    pq.write_table(table, path)


class VideoOut:
    """One MP4 per camera, episodes appended back to back at a constant frame rate."""

    def __init__(self, path: Path, shape: tuple[int, ...], fps: float):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.container = av.open(str(path), "w")
        rate = Fraction(fps).limit_denominator(1001)
        self.stream = self.container.add_stream("libx264", rate=rate)
        self.stream.height, self.stream.width = int(shape[0]), int(shape[1])
        self.stream.pix_fmt = "yuv420p"
        self.stream.options = {"crf": "20", "preset": "veryfast", "g": "30", "bf": "0"}
        self.stream.codec_context.time_base = 1 / rate
        self.frames = 0

    def write(self, rgb: np.ndarray) -> None:
        for img in rgb:
            frame = yuv420p_frame(img)
            frame.pts = self.frames
            self.frames += 1
            for packet in self.stream.encode(frame):
                self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        self.container.close()
