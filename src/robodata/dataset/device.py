"""Camera frames to float on the consumer's device.

The loader's transport stays uint8 (`DatasetConfig(frames="uint8")`, (B, T, H, W, 3), or
"uint8_chw"): 4x fewer bytes written by the workers, through shared memory and over the
host-to-device copy than float32, and no float pass on the CPU (a frame shown by several
overlapping windows is decoded and converted from YUV once; each further window gets a uint8
copy, a quarter of the float32 bytes). `frames_to_float` then converts (and normalises)
where the model runs, on the accelerator: one elementwise kernel per camera tensor.
`DatasetConfig(frames="float32")` remains for consumers that want float32 on the CPU
(LeRobot's camera tensors), converting in the decode threads.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from robodata.errors import ConfigError

LAYOUTS = ("hwc", "chw")


def frames_to_float(
    frames: torch.Tensor,
    device: torch.device | str | None = None,
    layout: str = "hwc",
    mean: Sequence[float] | torch.Tensor | None = None,
    std: Sequence[float] | torch.Tensor | None = None,
) -> torch.Tensor:
    """uint8 frames (..., H, W, 3) ("hwc", the loader's default) or (..., 3, H, W) ("chw") ->
    float32 (..., 3, H, W) in [0, 1] on `device`, then (x - mean) / std per channel if given.

    The uint8 tensor is moved first (non-blocking: from pinned memory the copy overlaps compute)
    and converted on `device`.

    Raises:
        ConfigError: not uint8, an unknown layout, no channel axis of 3, or a mean/std that is not
            3 values (std > 0).
    """
    if layout not in LAYOUTS:
        raise ConfigError(f"frames layout must be one of {LAYOUTS}, got {layout!r}")
    if frames.dtype != torch.uint8:
        raise ConfigError(f"frames_to_float takes uint8 frames, got {frames.dtype}")
    axis = -1 if layout == "hwc" else -3
    if frames.ndim < 3 or frames.shape[axis] != 3:
        raise ConfigError(f"frames of layout {layout!r} need 3 channels on axis {axis}, got {tuple(frames.shape)}")
    x = frames.to(device, non_blocking=True) if device is not None else frames
    if layout == "hwc":
        x = x.movedim(-1, -3)
    out = x.to(torch.float32).div_(255.0)
    if mean is not None or std is not None:
        m = torch.as_tensor(mean if mean is not None else (0.0, 0.0, 0.0), dtype=torch.float32, device=out.device)
        s = torch.as_tensor(std if std is not None else (1.0, 1.0, 1.0), dtype=torch.float32, device=out.device)
        if m.numel() != 3 or s.numel() != 3 or bool((s <= 0).any()):
            raise ConfigError(f"mean and std need 3 values (std > 0), got {m.tolist()} and {s.tolist()}")
        out.sub_(m.view(3, 1, 1)).div_(s.view(3, 1, 1))
    return out
