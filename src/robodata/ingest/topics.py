"""Topic mapping for MCAP / ROS 2 bags: which topic becomes which container stream.

Rules are regular expressions over topic names; `{name}` in `stream` is replaced by the
rule's named group `name` (with `join`, its slashes become `join`: `/camera/color/image_raw` ->
`camera_color`). Kinds: video (CompressedImage / Image), joint_state (sensor_msgs/JointState ->
joint_pos, joint_vel, joint_cur, cmd), array (a numeric field of a custom message, `field` a
dotted path), vector (a structured message, or its `field`, flattened to one named vector:
Vector3, Quaternion, Pose, Twist, Imu, Odometry, TransformStamped, ...; robodata.ingest.flatten),
events (a string field). `load_topics(FILE.yaml)` reads rules from a file (docs/ingestion.md).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from robodata.config import require

TOPIC_KINDS = ("video", "joint_state", "array", "vector", "events", "ignore")
NAMED_KINDS = ("video", "array", "vector")  # the kinds whose stream `stream` names


@dataclass(frozen=True)
class TopicRule:
    topic: str  # regex, full match
    kind: str
    stream: str = "{name}"  # used by video / array / vector rules only
    field: str = ""  # array / events: dotted path into the message
    rate_hz: float = 0.0  # nominal rate; 0 -> measured
    units: str = ""
    join: str = ""  # replaces "/" in the captured groups (nested names); "" keeps them as captured

    def __post_init__(self) -> None:
        require(self.kind in TOPIC_KINDS, f"topic rule {self.topic!r}: kind must be one of {TOPIC_KINDS}")
        try:
            rx = re.compile(self.topic)
        except re.error as exc:
            require(False, f"topic rule {self.topic!r}: bad regex ({exc})")
        require(self.kind not in ("array",) or bool(self.field), f"topic rule {self.topic!r}: array needs `field`")
        if self.kind not in NAMED_KINDS:  # ignore, joint_state (joint_pos, ...), events: `stream` is not used
            return
        try:
            named = {f for _, f, _, _ in string.Formatter().parse(self.stream) if f is not None}
        except ValueError as exc:
            named = set()
            require(False, f"topic rule {self.topic!r}: bad stream template {self.stream!r} ({exc})")
        missing = sorted(named - set(rx.groupindex))
        require(
            not missing,
            f"topic rule {self.topic!r}: stream {self.stream!r} uses {missing} but the topic regex captures "
            f"{sorted(rx.groupindex) or 'no named group'}: add (?P<{missing[0] if missing else 'name'}>...) to "
            "`topic`, or give `stream:` a fixed name",
        )

    def match(self, topic: str) -> str | None:
        m = re.fullmatch(self.topic, topic)
        if m is None:
            return None
        if self.kind not in NAMED_KINDS:
            return ""
        groups = {k: (v or "").replace("/", self.join) if self.join else (v or "") for k, v in m.groupdict().items()}
        return self.stream.format(**groups) if "{" in self.stream else self.stream


# nested camera topics: RealSense /camera/color/image_raw, ZED /zed2/left/image_rect_color, ...
NESTED_CAMERA = (
    r"/(?P<name>[A-Za-z0-9_]+(/[A-Za-z0-9_]+)*?)/image(_raw|_rect_color|_rect_raw|_rect|_color|_mono)?"
    r"(/compressed)?"
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
                TopicRule(NESTED_CAMERA, "video", join="_"),  # /camera/color/image_raw -> camera_color
                TopicRule(r"/joint_states", "joint_state", stream="joint"),
                TopicRule(r"/events", "events", stream="events", field="event"),
                TopicRule(r"/(rosout|rosout_agg|parameter_events|tf|tf_static)", "ignore", stream="-"),
            )
        )

    def extended(self, *rules: TopicRule) -> TopicMap:
        """Custom rules first, then these."""
        return TopicMap(tuple(rules) + self.rules, self.unknown)


def load_topics(path: str) -> tuple[TopicRule, ...]:
    """Topic rules from a YAML file: a list of rules, or {rules: [...]}; each rule's keys are
    TopicRule's fields. ConfigError naming the file and rule when one is bad."""
    from robodata.config import load_yaml_list

    return load_yaml_list(TopicRule, path, "--topics", "rules")
