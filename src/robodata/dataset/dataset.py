"""PatternDataset: a map-style torch Dataset over a manifest and a ReadPattern.

Keys are `Anchor`s from PatternSampler (or `int` sample ids). `batch(keys)` serves a
whole batch at once (and `__getitems__`, which torch's DataLoader calls with a batch's
keys): samples of the same episode share one footer, one range read per chunk and one
decode per GOP. `robodata.dataset.loader.PatternLoader` feeds `batch` to a DataLoader.

Each sample is a dict: one uint8 tensor (T, H, W, 3) per camera and one float tensor
(T, *shape) per array stream, `<stream>_is_pad` (T,) bool where a wanted sample fell
outside the episode (padded with the nearest real one), `episode_index` and `t`. Frames
stay uint8 through the worker queues; convert to float on the GPU. Where the consumer wants
float32 (T, 3, H, W) in [0, 1] on the CPU (LeRobot's camera tensors),
`DatasetConfig(frames="float32")` has each decode thread convert the frame as it writes it
into the batch: no uint8 batch and no second pass in the trainer's process.

Per worker process: an LRU of open readers (footer parsed once, from the manifest's
footer_offset/footer_length hints: no extra trailer read), a decode thread per camera.
Each decoded frame is copied once into the batch (further samples showing the same frame
copy it from there); with a batch slot (robodata.dataset.ring) that memory is reused.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import Dataset, get_worker_info

from robodata.config import require
from robodata.container import EpisodeReader
from robodata.container.rows import check_episode, refuse_uri
from robodata.dataset.frames import GopDecoder, decode_pool, fetch_streams, nearest, spans
from robodata.dataset.index import Anchor, SampleIndex, in_split
from robodata.dataset.pattern import ReadPattern, StreamWindow, preset_for
from robodata.dataset.ring import Arena
from robodata.dataset.skips import SkipLog, fill_skipping, open_error
from robodata.errors import ContainerError


@dataclass(frozen=True)
class DatasetConfig:
    split: str | None = "train"  # manifest split to use (None: all rows)
    reader_cache: int = 128  # open readers kept per worker
    decode_threads: int = 0  # threads per worker for camera decode (0: one per camera)
    seed: int = 0  # only used for jittered anchors when keys are ints
    use_weights: bool = True  # sample episodes by the manifest's mixing weights (see SampleIndex)
    # camera tensors: "uint8" (T, H, W, 3), 4x fewer bytes through worker queues; "uint8_chw"
    # (T, 3, H, W) uint8 (LeRobot's return_uint8=True); "float32" (T, 3, H, W) in [0, 1]
    # (LeRobot's default); the decode thread converts each frame as it copies it out of the decoder
    frames: str = "uint8"
    # compare each container's footer episode_id with its row's and skip a row pointed at another
    # episode's container; False only for synthetic manifests whose rows share a few containers
    check_episode_ids: bool = True

    def __post_init__(self) -> None:
        require(self.reader_cache >= 1, "reader_cache must be >= 1")
        require(self.decode_threads >= 0, "decode_threads must be >= 0")
        require(self.frames in FRAME_FORMATS, f"frames must be one of {FRAME_FORMATS}, not {self.frames!r}")


FRAME_FORMATS = ("uint8", "uint8_chw", "float32")
_SCALE = np.float32(255.0)


class PatternDataset(Dataset):
    """Map-style dataset of a manifest's samples under a read pattern (see the module docstring).

    Args:
        manifest: the manifest's rows (`robodata.curate.manifest.read_manifest`); needs the
            columns uri, duration_s and stream_rates_json, and uses split, weight, size_bytes,
            footer_offset and footer_length when present.
        pattern: what one sample reads around its anchor.
        cache: a page cache (`robodata.cache.PageCache`) to read containers through, or None
            to read them directly.
        config: split, reader cache, decode threads, seed and weighting; defaults if None.

    Raises:
        ConfigError: the pattern reads streams the manifest's episodes do not have, the
            manifest's weights are unusable, or none of its rows is in `config.split`.
    """

    def __init__(
        self, manifest: pa.Table, pattern: ReadPattern, cache: Any = None, config: DatasetConfig | None = None
    ):
        self.config = config or DatasetConfig()
        if self.config.split is not None and "split" in manifest.column_names:
            manifest = in_split(manifest, self.config.split)
        self.manifest = manifest
        self.pattern = pattern
        self.cache = cache
        self.index = SampleIndex(manifest, pattern, use_weights=self.config.use_weights)
        # Per-row lookups read the manifest's own Arrow columns: Python lists of them cost ~270
        # bytes a row (about 13 GB at 50M episodes), on top of the table they copy.
        self._uris = manifest.column("uri")
        self._ids = manifest.column("episode_id") if "episode_id" in manifest.column_names else None
        cols = set(manifest.column_names)
        self._hints = {k: manifest.column(k) for k in ("size_bytes", "footer_offset", "footer_length") if k in cols}
        self._pid = -1
        self.skipped = SkipLog()  # rows that could not serve samples (this process), with reasons

    @classmethod
    def from_manifest(
        cls,
        path: str | Path,
        pattern: str | ReadPattern = "wam",
        cache: Any = None,
        config: DatasetConfig | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> PatternDataset:
        """The dataset of a manifest file in one line: `PatternDataset.from_manifest(path, "vla")`.

        Args:
            path: a manifest file written by curation (local path or object-store URI); its
                content hash is verified.
            pattern: a ReadPattern, or a preset name ("wam", "vla") laid over the manifest's
                cameras and stream rates (`preset_for`: those most of its episodes have).
            cache: a page cache to read containers through, or None.
            config: see DatasetConfig; defaults if None.
            storage_options: object-store options for reading the manifest file.

        Returns:
            The PatternDataset over the manifest's rows.

        Raises:
            ManifestError: the file is not a readable manifest or its content hash does not match.
            ConfigError: unknown preset, or the pattern reads streams the episodes do not have.
        """
        from robodata.curate.manifest import read_manifest

        table = read_manifest(path, storage_options=storage_options)
        if isinstance(pattern, str):
            pattern = preset_for(table, pattern)
        return cls(table, pattern, cache=cache, config=config)

    def __len__(self) -> int:
        """Number of samples (anchors, after weighting) in the index."""
        return len(self.index)

    # ------------------------------------------------------------------ per-process state
    def _proc(self) -> None:
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._readers: OrderedDict[int, EpisodeReader] = OrderedDict()
            n = self.config.decode_threads or sum(len(w.streams) for w in self.pattern.video)
            self._pool = decode_pool(n)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for k in ("_readers", "_pool"):
            state.pop(k, None)
        state["_pid"] = -1
        return state

    def reader(self, row: int) -> EpisodeReader:
        """This process's open reader of manifest row `row` (LRU of `config.reader_cache`).

        Raises:
            ContainerError: the container cannot be opened or its footer is invalid, the row's
                uri is not one a manifest may name (robodata.storage.location.uri_refusal), or
                the container holds another episode than the row's episode_id.
        """
        self._proc()
        r = self._readers.get(row)
        if r is not None:
            self._readers.move_to_end(row)
            return r
        uri = self._uris[row].as_py()
        size = self._hint("size_bytes", row) or None
        refuse_uri(uri or "")
        try:
            if not uri:
                raise FileNotFoundError("the manifest row has no container (a quarantined episode)")
            src = self.cache.source(uri, size=size) if self.cache is not None else uri
            fo, fl = self._hint("footer_offset", row), self._hint("footer_length", row)
            r = EpisodeReader.open(src, footer_offset=fo, footer_length=fl)
        except OSError as exc:
            raise open_error(uri, exc) from None
        if self._ids is not None and self.config.check_episode_ids:
            check_episode(r, self._ids[row].as_py())
        self._readers[row] = r
        if len(self._readers) > self.config.reader_cache:
            _, old = self._readers.popitem(last=False)
            old.close()
        return r

    def _hint(self, name: str, row: int) -> int | None:
        col = self._hints.get(name)
        return None if col is None else col[row].as_py()

    # ------------------------------------------------------------------ samples
    def __getitem__(self, key: Anchor | int) -> dict[str, Any]:
        """One sample (see the module docstring for its keys).

        Args:
            key: an Anchor from PatternSampler, or an int sample id (located with `config.seed`).

        Returns:
            {camera: uint8 (T, H, W, 3) (float32 (T, 3, H, W) with frames="float32"),
            array stream: (T, *shape), `<stream>_is_pad`: bool (T,),
            "episode_index": manifest row, "t": anchor seconds}.

        Raises:
            IndexError: an int key outside [0, len(self)).
            ContainerError: a container is unreadable or lacks samples near the anchor.
        """
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: Sequence[Anchor | int]) -> list[dict[str, Any]]:
        """Per-sample dicts (views into one batch) for torch's default collate."""
        batch = self.batch(keys, shared=False)
        return [{k: v[i] for k, v in batch.items()} for i in range(len(keys))]

    def batch(
        self, keys: Sequence[Anchor | int], shared: bool | None = None, arena: Arena | None = None
    ) -> dict[str, torch.Tensor]:
        """One collated batch: every frame is decoded once and written straight into the
        batch tensors; in a dataloader worker those live in shared memory from the start,
        so nothing is stacked or copied again on the way to the trainer. With `arena` (a
        worker's batch slot, see robodata.dataset.ring) the large tensors are carved out of
        that slot's memory instead of fresh memory.

        Args:
            keys: the batch's Anchors (or int sample ids).
            shared: allocate in shared memory (None: when inside a DataLoader worker).
            arena: a reused batch slot to carve the large tensors from, or None.

        Returns:
            {name: tensor with a leading batch dimension}, keys as in `__getitem__`.

        Raises:
            IndexError: an int key outside [0, len(self)).
            ContainerError: no episode left that can serve (one that cannot is skipped and
                reported in `skipped`, its samples replaced by other rows').
            ValueError: samples of one batch have different frame shapes (mixed resolutions
                without `resize`).
        """
        anchors = [k if isinstance(k, Anchor) else self.index.locate(int(k), self.config.seed) for k in keys]
        if shared is None:
            shared = get_worker_info() is not None
        out = _Batch(len(anchors), shared, arena)
        fill_skipping(  # a row that cannot serve is skipped, reported, its samples taken from other rows
            anchors,
            lambda row, items: self._fill(row, [anchors[i].t for i in items], items, out),
            lambda row: self._uris[row].as_py() or "",
            self.index,
            self.skipped,
            self.config.seed,
        )
        out.tensors["episode_index"] = torch.tensor([a.row for a in anchors], dtype=torch.int64)
        out.tensors["t"] = torch.tensor([a.t for a in anchors], dtype=torch.float64)
        return out.tensors

    def _targets(self, w: StreamWindow, rate: float, ts: list[float]) -> np.ndarray:
        steps = w.offset + np.arange(w.length) * w.every
        return np.asarray(ts)[:, None] + steps[None, :] / rate  # (samples, length) seconds

    def _fill(self, row: int, ts: list[float], slots: list[int], out: _Batch) -> None:
        r = self.reader(row)
        streams = r.meta.streams
        # ---- cameras: one fetch, one decode per GOP for all of this episode's samples
        video = [(w, s) for w in self.pattern.video for s in w.streams]
        if video:
            targets = {s: self._targets(w, streams[s].rate_hz, ts) for w, s in video}
            # nearest-sample tolerance is half a period: fetch no chunk that cannot hold a pick; each
            # sample's own span, so samples scattered over an episode (a global shuffle) fetch their
            # chunks, not every chunk between them
            ranges = {
                s: spans(t.min(axis=1) - 0.51 / streams[s].rate_hz, t.max(axis=1) + 0.51 / streams[s].rate_hz)
                for s, t in targets.items()
            }
            frames = fetch_streams(r, ranges)
            picks, wanted = {}, {}
            for _w, s in video:
                times, pts_by_time = frames[s].by_time()
                if len(times) == 0:
                    raise_missing(r, s, ts)
                j, ok = nearest(times, targets[s].ravel(), 0.5 / streams[s].rate_hz)
                picks[s] = (pts_by_time[j].reshape(targets[s].shape), ok.reshape(targets[s].shape))
                wanted[s] = {int(p) for p in pts_by_time[j]}

            def run(item):
                w, s = item
                settings = r.layout.group_of(s).video
                if settings is None:
                    raise ContainerError(
                        r.meta.episode_id, f"stream {s!r} is read as video but stored in a non-video group"
                    )
                as_float, chw = self.config.frames == "float32", self.config.frames == "uint8_chw"
                planar = as_float or chw  # channel-first out: the decoder hands over R, G, B planes
                dec = GopDecoder(settings.codec, r.codec_extradata(s), w.resize, r.meta.episode_id, s, planar)
                pts, ok = picks[s]
                h, wd = w.resize or streams[s].shape[:2]
                if as_float:
                    dst = out.array(s, (w.length, 3, h, wd), torch.float32)
                elif chw:
                    dst = out.array(s, (w.length, 3, h, wd), torch.uint8)
                else:
                    dst = out.array(s, (w.length, h, wd, 3), torch.uint8)
                where: dict[int, list[tuple[int, int]]] = {}  # pts -> every (slot, step) showing it
                for k, slot in enumerate(slots):
                    for t_i, p in enumerate(pts[k]):
                        where.setdefault(int(p), []).append((slot, t_i))

                def sink(p: int, rgb) -> None:
                    first, *rest = where[p]
                    if as_float:  # one pass per plane: uint8 -> float32 / 255 (numpy releases the GIL)
                        for c in range(3):
                            np.divide(rgb[c], _SCALE, out=dst[first][c])
                    elif chw:
                        for c in range(3):
                            dst[first][c] = rgb[c]  # a contiguous copy per plane
                    else:
                        dst[first] = rgb  # the one copy out of the decoder
                    for d in rest:
                        dst[d] = dst[first]

                n = dec.decode_into(frames[s], wanted[s], sink)
                out.array(f"{s}_is_pad", (w.length,), torch.bool)[slots] = ~ok
                return n

            r.stats.frames_decoded += sum(self._pool.map(run, video))
        # ---- low-dimensional streams: one window read covering all of this episode's samples
        arrays = [(w, s) for w in self.pattern.windows if w.kind == "array" for s in w.streams]
        if arrays:
            targets = {s: self._targets(w, streams[s].rate_hz, ts) for w, s in arrays}
            lo = min(float(t.min()) - 0.51 / streams[s].rate_hz for s, t in targets.items())
            hi = max(float(t.max()) + 0.51 / streams[s].rate_hz for s, t in targets.items())
            win = r.read_window(max(lo, 0.0), hi, [s for _, s in arrays])
            for w, s in arrays:
                data, t = win[s].data, win[s].t
                if len(t) == 0:
                    raise_missing(r, s, ts)
                j, ok = nearest(t, targets[s].ravel(), 0.5 / streams[s].rate_hz)
                vals = data[j].reshape(*targets[s].shape, *data.shape[1:])
                dtype = torch.from_numpy(data[:0]).dtype
                out.array(s, (w.length, *data.shape[1:]), dtype)[slots] = vals
                out.array(f"{s}_is_pad", (w.length,), torch.bool)[slots] = ~ok.reshape(targets[s].shape)

    def close(self) -> None:
        """Close this process's readers and decode threads (reopened on next use)."""
        if self._pid == os.getpid():
            for r in self._readers.values():
                r.close()
            self._readers.clear()
            self._pool.shutdown(wait=False)
            self._pid = -1


class _Batch:
    """Batch tensors allocated on first use: the large ones in `arena` when given (a reused
    batch slot), the rest in fresh shared memory when `shared` (worker side)."""

    def __init__(self, size: int, shared: bool, arena: Arena | None = None):
        self.size = size
        self.shared = shared
        self.arena = arena
        self.tensors: dict[str, torch.Tensor] = {}
        self._np: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def array(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> np.ndarray:
        with self._lock:
            a = self._np.get(name)
            if a is None:
                full = (self.size, *shape)
                t = self.arena.tensor(full, dtype) if self.arena is not None else None
                if t is None and self.shared:
                    nbytes = int(np.prod(full)) * torch.empty(0, dtype=dtype).element_size()
                    storage = torch.UntypedStorage._new_shared(max(nbytes, 1))
                    t = torch.empty(0, dtype=torch.uint8).set_(storage)[:nbytes].view(dtype).view(full)
                elif t is None:
                    t = torch.empty(full, dtype=dtype)
                self.tensors[name] = t
                a = self._np[name] = t.numpy()
            elif a.shape[1:] != shape:
                raise ValueError(f"{name}: samples of one batch have different shapes {a.shape[1:]} and {shape}")
            return a


def raise_missing(r: EpisodeReader, stream: str, ts: list[float]) -> None:
    raise ContainerError(r.meta.episode_id, f"stream {stream!r} has no samples near t={min(ts):.3f}..{max(ts):.3f} s")
