"""The two baseline loaders the loader benchmark compares robodata against.

Both serve exactly the samples robodata serves (same Anchor keys, same ReadPattern, same
output dict) from the same episodes, one sample at a time as their layouts are used:

JpegDataset  legacy layout: one JPEG file per frame, decoded with PIL (libjpeg-turbo);
             state from the episode's Parquet file (read once per worker, kept in memory).
Mp4Dataset   LeRobot-style: one MP4 per camera, GOP 2, decoded with PyAV per sample:
             open, seek to the keyframe before the first wanted timestamp, decode to the
             last, keep the frames nearest the wanted timestamps (only those are converted
             to RGB, which is kinder to the baseline than converting every decoded frame).
"""

from __future__ import annotations

import av
import numpy as np
import pyarrow.parquet as pq
import torch
from PIL import Image
from torch.utils.data import Dataset

from bench.loader_data import FPS, STATE_HZ, Episode
from robodata.dataset import Anchor, ReadPattern
from robodata.dataset.frames import nearest


class _Baseline(Dataset):
    def __init__(self, episodes: list[Episode], pattern: ReadPattern):
        self.episodes = episodes
        self.pattern = pattern
        self._state: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = {}

    def __len__(self) -> int:  # keys come from the sampler list
        return 0

    def _arrays(self, row: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if row not in self._state:
            t = pq.read_table(self.episodes[row].state)
            cols = {
                c: t.column(c).combine_chunks().flatten().to_numpy().reshape(t.num_rows, -1)
                for c in t.column_names
                if c != "t_ns"
            }
            self._state[row] = (t.column("t_ns").to_numpy() / 1e9, cols)
        return self._state[row]

    def __getitem__(self, a: Anchor) -> dict[str, torch.Tensor]:
        ep = self.episodes[a.row]
        out: dict[str, torch.Tensor] = {}
        for w in self.pattern.windows:
            rate = FPS if w.kind == "video" else STATE_HZ
            targets = a.t + (w.offset + np.arange(w.length) * w.every) / rate
            if w.kind == "video":
                idx = np.rint(targets * FPS).astype(np.int64)
                pad = (idx < 0) | (idx >= ep.n_frames)
                idx = np.clip(idx, 0, ep.n_frames - 1)
                for cam in w.streams:
                    out[cam] = torch.from_numpy(self.frames(ep, cam, idx))
                    out[f"{cam}_is_pad"] = torch.from_numpy(pad)
            else:
                t, cols = self._arrays(a.row)
                j, ok = nearest(t, targets, 0.5 / rate)
                for s in w.streams:
                    out[s] = torch.from_numpy(np.ascontiguousarray(cols[s][j]))
                    out[f"{s}_is_pad"] = torch.from_numpy(~ok)
        out["episode_index"] = torch.tensor(a.row)
        out["t"] = torch.tensor(a.t, dtype=torch.float64)
        return out

    def frames(self, ep: Episode, cam: str, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class JpegDataset(_Baseline):
    def frames(self, ep: Episode, cam: str, idx: np.ndarray) -> np.ndarray:
        return np.stack([np.asarray(Image.open(ep.jpeg(cam, int(i))).convert("RGB")) for i in idx])


class Mp4Dataset(_Baseline):
    def frames(self, ep: Episode, cam: str, idx: np.ndarray) -> np.ndarray:
        ts = idx / FPS
        first, last, tol = float(ts.min()), float(ts.max()), 0.5 / FPS
        with av.open(str(ep.mp4(cam))) as c:
            s = c.streams.video[0]
            assert s.time_base is not None, f"{ep.mp4(cam)}: a stream written by bench.loader_data has a time base"
            c.seek(int(first / s.time_base), stream=s, backward=True, any_frame=False)
            got_t: list[float] = []
            got: list = []
            for frame in c.decode(s):
                ft = float(frame.time)
                if ft < first - tol:
                    continue
                got_t.append(ft)
                got.append(frame)
                if ft >= last - tol:
                    break
        times = np.asarray(got_t)
        j, _ = nearest(times, ts, tol)
        picked = {int(k): got[int(k)].to_ndarray(format="rgb24") for k in set(j.tolist())}
        return np.stack([picked[int(k)] for k in j])
