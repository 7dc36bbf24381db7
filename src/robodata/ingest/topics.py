"""Topic mapping for MCAP / ROS 2 bags: which topic becomes which container stream.

Rules are regular expressions over topic names; `{name}` in `stream` is replaced by the
rule's named group `name`. Kinds: video (CompressedImage / Image), joint_state
(sensor_msgs/JointState -> joint_pos, joint_vel, joint_cur, cmd), array (a numeric field of a
custom message, `field` a dotted path), events (a string field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from robodata.config import require

TOPIC_KINDS = ("video", "joint_state", "array", "events", "ignore")


@dataclass(frozen=True)
class TopicRule:
    topic: str  # regex, full match
    kind: str
    stream: str = "{name}"
    field: str = ""  # array / events: dotted path into the message
    rate_hz: float = 0.0  # nominal rate; 0 -> measured
    units: str = ""

    def __post_init__(self) -> None:
        require(self.kind in TOPIC_KINDS, f"topic rule {self.topic!r}: kind must be one of {TOPIC_KINDS}")
        try:
            re.compile(self.topic)
        except re.error as exc:
            require(False, f"topic rule {self.topic!r}: bad regex ({exc})")
        require(self.kind not in ("array",) or bool(self.field), f"topic rule {self.topic!r}: array needs `field`")

    def match(self, topic: str) -> str | None:
        m = re.fullmatch(self.topic, topic)
        if m is None:
            return None
        return (
            self.stream.format(**{k: v for k, v in m.groupdict().items() if v is not None})
            if "{" in self.stream
            else self.stream
        )


@dataclass(frozen=True)
class TopicMap:
    rules: tuple[TopicRule, ...]
    unknown: str = "report"  # report (QC finding) | ignore

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(self.rules))
        require(self.unknown in ("report", "ignore"), "topic map: unknown must be report or ignore")

    def resolve(self, topic: str) -> tuple[TopicRule, str] | None:
        for rule in self.rules:
            stream = rule.match(topic)
            if stream is not None:
                return rule, stream
        return None

    @classmethod
    def default(cls) -> TopicMap:
        return cls(
            rules=(
                TopicRule(r"/(?P<name>[A-Za-z0-9_]+)/image(_raw|/compressed)?", "video"),
                TopicRule(r"/joint_states", "joint_state", stream="joint"),
                TopicRule(r"/events", "events", stream="events", field="event"),
                TopicRule(r"/(rosout|rosout_agg|parameter_events|tf|tf_static)", "ignore", stream="-"),
            )
        )

    def extended(self, *rules: TopicRule) -> TopicMap:
        """Custom rules first, then these."""
        return TopicMap(tuple(rules) + self.rules, self.unknown)
