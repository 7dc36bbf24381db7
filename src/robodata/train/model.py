"""A small world-action model: conv frame encoder + action head + next-latent head.

Every frame of every camera goes through one shared conv encoder to a latent. The context
latents (all frames but the last) and the proprio state feed an MLP trunk with two heads:
an action chunk (K future actions) and the latent of the next frame per camera. The
next-frame target is the encoder's own latent of the last frame, detached (a JEPA-style
latent world model: it predicts what it will see, not pixels).

Dropout masks are drawn from a generator keyed by (seed, step) over the *global* batch and
sliced to this rank's rows, so a run gives the same result on any world size (up to the
order of floating-point reductions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from robodata.dataset.device import frames_to_float
from robodata.errors import RobodataError
from robodata.train.config import ModelConfig


@dataclass
class Inputs:
    frames: torch.Tensor  # (B, C, T, 3, H, W) float in [0, 1]
    state: torch.Tensor  # (B, S)
    action: torch.Tensor  # (B, K, A)


@dataclass(frozen=True)
class NoiseKey:
    """Keys the dropout masks: the global batch of `step` is dealt round robin, so this rank's
    row j is row j * world_size + rank of the global batch (the sampler's layout)."""

    seed: int
    step: int
    rank: int
    world_size: int
    global_rows: int


class FrameEncoder(nn.Module):
    def __init__(self, channels: list[int], latent_dim: int):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for c in channels:
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.GroupNorm(1, c), nn.GELU()]
            c_in = c
        self.conv = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(4)  # a coarse 4x4 map keeps where things are
        self.proj = nn.Linear(c_in * 16, latent_dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (N, 3, H, W) -> (N, D)
        return self.proj(self.pool(self.conv(images)).flatten(1))


class Trunk(nn.Module):
    def __init__(self, d_in: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, p: float, key: NoiseKey | None) -> torch.Tensor:
        h = F.gelu(self.fc1(x))
        if self.training and p > 0 and key is not None:
            h = h * keyed_dropout_mask(h.shape, p, key, h.device)
        return F.gelu(self.fc2(h))


def keyed_dropout_mask(shape: torch.Size, p: float, key: NoiseKey, device: torch.device) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed((key.seed * 1_000_003 + key.step) % (2**63))
    keep = torch.rand((key.global_rows, *shape[1:]), generator=g, device=device) >= p
    return keep[key.rank :: key.world_size][: shape[0]].to(torch.float32) / (1.0 - p)


class WorldActionModel(nn.Module):
    def __init__(self, cfg: ModelConfig, context_frames: int):
        super().__init__()
        self.cfg = cfg
        self.context_frames = context_frames
        n_cam, d = len(cfg.cameras), cfg.latent_dim
        self.encoder = FrameEncoder(list(cfg.channels), d)
        self.camera_embed = nn.Parameter(torch.zeros(n_cam, d))
        self.trunk = Trunk(n_cam * context_frames * d + cfg.state_dim, cfg.hidden_dim)
        self.action_head = nn.Linear(cfg.hidden_dim, cfg.action_chunk * cfg.action_dim)
        self.latent_head = nn.Linear(cfg.hidden_dim, n_cam * d)

    def predict(self, frames: torch.Tensor, state: torch.Tensor, key: NoiseKey | None = None):
        """(action chunk (B, K, A), predicted next latent (B, C, D), the next frame's latent (B, C, D))."""
        b, c, t = frames.shape[:3]
        z = self.encoder(frames.flatten(0, 2)).view(b, c, t, -1) + self.camera_embed[None, :, None, :]
        context, target = z[:, :, :-1], z[:, :, -1]
        h = self.trunk(torch.cat([context.flatten(1), state], dim=1), self.cfg.dropout, key)
        actions = self.action_head(h).view(b, self.cfg.action_chunk, self.cfg.action_dim)
        next_latent = self.latent_head(h).view(b, c, -1)
        return actions, next_latent, target.detach()

    def forward(
        self, frames: torch.Tensor, state: torch.Tensor, action: torch.Tensor, key: NoiseKey | None = None
    ) -> torch.Tensor:
        """Training loss, stacked: [total, action MSE, next-latent MSE] (the root's forward, so
        FSDP's hooks see one fresh tensor rather than views)."""
        actions, next_latent, target = self.predict(frames, state, key)
        action_loss = F.mse_loss(actions, action)
        d = target.shape[-1]  # compare normalised latents: the target's scale cannot drift
        latent_loss = F.mse_loss(F.layer_norm(next_latent, (d,)), F.layer_norm(target, (d,)))
        return torch.stack([action_loss + self.cfg.latent_loss_weight * latent_loss, action_loss, latent_loss])

    def loss(self, inputs: Inputs, key: NoiseKey | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        losses = self(inputs.frames, inputs.state, inputs.action, key)
        parts = losses.detach()
        return losses[0], {"action_loss": float(parts[1]), "latent_loss": float(parts[2])}


def build_model(cfg: ModelConfig, frames: int) -> WorldActionModel:
    return WorldActionModel(cfg, context_frames=frames - 1)


def shard_units(model: WorldActionModel) -> list[nn.Module]:
    """Submodules that get their own FSDP group (bottom-up), before the root."""
    return [model.encoder, model.trunk, model.action_head, model.latent_head]


def to_inputs(batch: dict[str, Any], cfg: ModelConfig, frames: int, device: torch.device) -> Inputs:
    """Map a collated dataset batch to model inputs, with a clear error on a shape mismatch.

    Expects robodata.dataset's layout: one uint8 (B, T, H, W, 3) tensor per camera key,
    cfg.state_key (B, S) or (B, T, S), cfg.action_key (B, K', A) with K' >= action_chunk.
    """
    missing = [k for k in (*cfg.cameras, cfg.state_key, cfg.action_key) if k not in batch]
    if missing:
        raise RobodataError(f"training batch lacks {missing}; it has {sorted(batch)}")
    cams = [batch[c] for c in cfg.cameras]
    state, action = batch[cfg.state_key], batch[cfg.action_key]
    for x in cams:
        if (
            x.dtype != torch.uint8
            or x.ndim != 5
            or x.shape[-1] != 3
            or x.shape[1] != frames
            or x.shape != cams[0].shape
        ):
            raise RobodataError(
                f"frames must be uint8 (B, T={frames}, H, W, 3) per camera, all of one shape, got {x.dtype} "
                f"{tuple(x.shape)}"
            )
    if state.ndim == 3:
        state = state[:, -1]
    if (
        state.ndim != 2
        or state.shape[-1] != cfg.state_dim
        or action.ndim != 3
        or action.shape[1] < cfg.action_chunk
        or action.shape[2] != cfg.action_dim
    ):
        raise RobodataError(
            f"{cfg.state_key} {tuple(state.shape)} / {cfg.action_key} {tuple(action.shape)} do not "
            f"match the model: state_dim={cfg.state_dim}, action (B, >= {cfg.action_chunk}, "
            f"{cfg.action_dim})"
        )
    # uint8 over the host-to-device copy, converted on the device (robodata.dataset.device); the
    # cameras are stacked there too, not in a CPU copy first
    frames_f = torch.stack([frames_to_float(x, device) for x in cams], dim=1)
    return Inputs(frames_f, state.to(device, torch.float32), action[:, : cfg.action_chunk].to(device, torch.float32))
