"""rosbags type stores shared by the recordings one process reads.

A fresh rosbags `Typestore` generates (and `exec`s) each message type's deserializers the first
time it is used: ~50 ms a recording for the handful of types a robot bag holds, paid by both
passes over it (timestamps, then frames), a third of the CPU of converting a short bag. So a
store is shared per (ROS 1 | ROS 2, `--msgs` folder, the candidates chosen for the recording)
and its generated code is reused.

Sharing must never change what a message decodes to:
- a type the base store or the `--msgs` folder defines decodes by that definition, as with a
  private store (the recording's own text for it is not used);
- a type a recording defines is registered with its definition text; a later recording that
  defines the same name differently (another robot's message version), or whose definition
  clashes with one registered earlier, gets a private store of its own, as does every recording
  once MAX_EMBEDDED types came from recordings.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Ros = Literal["ros1", "ros2"]
Verdict = Literal["ok", "conflict", "unknown"]
NESTED = "nested:"  # marks a type registered as part of another type's definition text
# types recordings may add to a shared store: a long-lived process fed recordings that each define
# new type names (hostile, or a fleet of one-off vendor packages) must not grow without bound
MAX_EMBEDDED = 2048


Choice = tuple[tuple[str, int], ...]  # (type, candidate index) for types `--msgs` defines several times


def new_store(ros: Ros, msgs: str = "", choice: Choice = ()) -> Any:
    """ROS 1 Noetic's or ROS 2 Humble's types plus the definitions under `msgs` (for a type with
    several candidates, the one `choice` names, else its first: robodata.ingest.importers.msgdefs)."""
    from rosbags.typesys import Stores, get_typestore

    from robodata.ingest.importers.msgdefs import load_msgdefs

    store = get_typestore(Stores.ROS1_NOETIC if ros == "ros1" else Stores.ROS2_HUMBLE)
    if msgs:
        store.register(load_msgdefs(msgs).typesdict(dict(choice)))
    return store


@dataclass
class SharedStore:
    store: Any  # rosbags.typesys.store.Typestore
    embedded: dict[str, str] = field(default_factory=dict)  # type name -> definition a recording gave
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ensure(self, typename: str, text: str, parse: Callable[[], dict]) -> Verdict:
        """Make `typename` (defined by `text`, "" when the recording gives none; parsed by `parse`)
        decodable here. "conflict": the shared store holds another definition of it or of a type
        it nests; "unknown": no definition at all (nor one this recording may use)."""
        from rosbags.typesys import TypesysError

        with self.lock:
            if typename in self.store.types:
                have = self.embedded.get(typename)
                if have is None or have == text:
                    return "ok"
                return "unknown" if not text else "conflict"
            if not text:
                return "unknown"
            if len(self.embedded) >= MAX_EMBEDDED:  # recordings that each bring new types: stores of their own
                return "conflict"
            before = set(self.store.types)
            try:
                self.store.register(parse())
            except TypesysError:
                return "conflict"
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            for name in set(self.store.types) - before:
                self.embedded[name] = f"{NESTED}{typename}:{digest}"
            self.embedded[typename] = text
            return "ok" if typename in self.store.types else "conflict"


def define_private(store: Any, typename: str, text: str, parse: Callable[[], dict]) -> Verdict:
    """`ensure` on a store of one recording: its base types win, as on the shared store."""
    if typename in store.types:
        return "ok"
    if not text:
        return "unknown"
    store.register(parse())
    return "ok"


_SHARED: dict[tuple[Ros, str, Choice], SharedStore] = {}
_LOCK = threading.Lock()


def shared(ros: Ros, msgs: str = "", choice: Choice = ()) -> SharedStore:
    with _LOCK:
        s = _SHARED.get((ros, msgs, choice))
        if s is None:
            s = _SHARED[(ros, msgs, choice)] = SharedStore(new_store(ros, msgs, choice))
        return s
