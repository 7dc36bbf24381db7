"""Procedural camera content for synthetic episodes: a textured workcell, a panning camera,
an arm driven by the joint trajectory and an object that moves once grasped.

Frames are cheap to render (slicing + a few painted blobs) but not constant: every pixel
region changes over time the way a real scene does, so codec figures are honest.
"""

from __future__ import annotations

import numpy as np


def _smooth_texture(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Low-frequency colour field plus tile edges and fine grain (a table, walls, clutter)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        for _ in range(6):
            fx, fy = rng.uniform(0.002, 0.03, 2)
            ph = rng.uniform(0, 2 * np.pi)
            img[..., c] += rng.uniform(10, 35) * np.sin(fx * xx + fy * yy + ph)
    img += 110
    tiles = ((xx // 48 + yy // 48) % 2 == 0)[..., None] * rng.uniform(10, 25)
    img += tiles
    grain = rng.normal(0, 4, (h // 2, w // 2, 3)).astype(np.float32)
    img += np.repeat(np.repeat(grain, 2, 0), 2, 1)[:h, :w]
    for _ in range(25):  # clutter: boxes of flat colour
        y, x = rng.integers(0, h - 40), rng.integers(0, w - 40)
        bh, bw = rng.integers(12, 60, 2)
        img[y : y + bh, x : x + bw] = rng.uniform(30, 230, 3)
    return np.clip(img, 0, 255).astype(np.uint8)


class SceneRenderer:
    def __init__(self, height: int, width: int, seed: int, view: int = 0):
        rng = np.random.default_rng(seed * 31 + view)
        self.h, self.w = height, width
        self.margin = max(32, height // 6)
        self.bg = _smooth_texture(rng, height + 2 * self.margin, width + 2 * self.margin)
        self.view = view
        self.pan_phase = rng.uniform(0, 2 * np.pi)
        self.arm_color = np.array([200, 200, 210], np.uint8)
        self.obj_color = rng.integers(40, 255, 3).astype(np.uint8)
        self.noise = [rng.integers(-2, 3, (height, width, 3), dtype=np.int16) for _ in range(4)]

    def render(self, t: float, joints: np.ndarray, grasped: bool) -> np.ndarray:
        m = self.margin
        dy = int(m + 0.6 * m * np.sin(0.21 * t + self.pan_phase))
        dx = int(m + 0.6 * m * np.cos(0.17 * t + self.pan_phase))
        frame = self.bg[dy : dy + self.h, dx : dx + self.w].copy()
        # Arm: planar 3-link chain from the bottom centre, painted as blobs along each link.
        scale = min(self.h, self.w) / 3.2
        px, py = self.w / 2 + (self.view - 1) * self.w * 0.15, self.h * 0.95
        ang = -np.pi / 2
        r = max(3, self.h // 40)
        for k in range(3):
            ang += float(joints[k % len(joints)])
            nx, ny = px + scale * 0.8 * np.cos(ang), py + scale * 0.8 * np.sin(ang)
            for a in np.linspace(0.0, 1.0, 12):
                self._blob(frame, px + a * (nx - px), py + a * (ny - py), r, self.arm_color)
            px, py = nx, ny
        # Object: at rest on the table, follows the gripper once grasped.
        ox, oy = (px, py + 2 * r) if grasped else (self.w * 0.7, self.h * 0.6)
        self._blob(frame, ox, oy, 3 * r, self.obj_color)
        noisy = frame.astype(np.int16) + self.noise[int(t * 30) % len(self.noise)]
        return np.clip(noisy, 0, 255).astype(np.uint8)

    def _blob(self, frame: np.ndarray, x: float, y: float, r: int, color: np.ndarray) -> None:
        x0, x1 = int(max(0, x - r)), int(min(self.w, x + r))
        y0, y1 = int(max(0, y - r)), int(min(self.h, y + r))
        if x1 > x0 and y1 > y0:
            frame[y0:y1, x0:x1] = color
