"""The `Stateful` protocol: anything resumable exposes state_dict/load_state_dict.

It matches torch.distributed.checkpoint.stateful.Stateful, so samplers, loaders,
uploaders and trainers can all be checkpointed the same way.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...
