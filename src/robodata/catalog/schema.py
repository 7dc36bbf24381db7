"""Shared column contracts: the catalog row (one per episode) and the manifest row.

The ingestion layer writes catalog rows; curation reads them and writes manifests;
the dataset reads manifests. Changing a column here is a format change.
"""

from __future__ import annotations

import json
import math

import pyarrow as pa

CATALOG_SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()),
        ("uri", pa.string()),  # container object (local path or s3://...)
        ("site", pa.string()),
        ("robot", pa.string()),
        ("task", pa.string()),
        ("vendor", pa.string()),
        ("start_time", pa.timestamp("us", tz="UTC")),
        ("day", pa.string()),  # YYYY-MM-DD of start_time (partition column)
        ("duration_s", pa.float64()),
        ("num_frames", pa.int32()),  # frames per camera (min over cameras)
        ("num_state_steps", pa.int32()),  # samples of the main proprio stream
        ("cameras", pa.list_(pa.string())),
        ("stream_rates_json", pa.string()),  # {"cam_left": 30.0, "joint_pos": 100.0, ...}
        ("success", pa.bool_()),
        ("quality_score", pa.float32()),
        ("qc_status", pa.string()),  # "pass" | "quarantined"
        ("layout_version", pa.string()),  # container layout id (format version + layout hash)
        ("ingest_batch", pa.string()),
        ("size_bytes", pa.int64()),
        ("footer_offset", pa.int64()),  # lets a loader fetch the index in one range read
        ("footer_length", pa.int64()),
        # Facts for mixing corpora (issue 23). Nulls: a quarantined row (no container) has null
        # dims / names / control_hz; strings are "" when unknown. Tables written before these
        # columns get them as nulls on open/merge (schema migration, robodata.catalog.table).
        ("robot_type", pa.string()),  # embodiment, e.g. "aloha", "koch", "franka"; "" if unknown
        ("source_format", pa.string()),  # importer kind: mcap | ros1-bag | ros2-bag | hdf5 | zarr | rlds | ...
        ("source_dataset", pa.string()),  # dataset / file the episode came from; "" if none
        ("state_dim", pa.int32()),  # width of the state stream (joint_pos, else the first array)
        ("action_dim", pa.int32()),  # width of the action stream (cmd); null if none
        ("state_names", pa.list_(pa.string())),  # column names of the state stream ([] if unnamed)
        ("action_names", pa.list_(pa.string())),
        ("control_hz", pa.float64()),  # nominal rate of the state stream
        ("language", pa.string()),  # instruction text; "" if none
        # -- QC facts (issue 24): every check that failed (blocking or not), why, and what the
        # episode holds. Curation filters on them; the default spec excludes any failed check.
        ("qc_failed", pa.list_(pa.string())),  # names of the failed checks; [] when all passed
        ("qc_reason", pa.string()),  # "check: reason; ..." of the failed checks ("" when none)
        ("streams", pa.list_(pa.string())),  # every stream the container holds (cameras, arrays, events)
        ("source_digest", pa.string()),  # content digest of the landing item (robodata.ingest.landing.dedup)
        # -- video (issue 40): per camera, whether the source's bitstream was kept or transcoded and why,
        # {"cam": {"mode": "copy" | "transcode", "reason": "..."}}; "{}" where nothing was decided
        ("video_json", pa.string()),
        # The budget order of the site's specs (robodata.catalog.order): written by every merge from
        # episode_id and the salt the table records; whatever a writer passes is replaced.
        ("budget_hash", pa.int64()),
        # -- stream roles (issue 37, robodata.container.roles): the state and action streams ("" when
        # none), and each camera's role in `cameras` order ("" when its name or the source names none)
        ("state_stream", pa.string()),
        ("action_stream", pa.string()),
        ("camera_roles", pa.list_(pa.string())),
    ]
)

MANIFEST_SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()),
        ("uri", pa.string()),
        ("site", pa.string()),
        ("task", pa.string()),
        ("duration_s", pa.float64()),
        ("num_frames", pa.int32()),
        ("num_state_steps", pa.int32()),
        ("cameras", pa.list_(pa.string())),
        ("stream_rates_json", pa.string()),
        ("layout_version", pa.string()),
        ("size_bytes", pa.int64()),
        ("footer_offset", pa.int64()),
        ("footer_length", pa.int64()),
        ("split", pa.string()),  # "train" | "val"
        ("weight", pa.float64()),  # sampling weight from the spec's mixing weights
        # -- mixing facts (issue 37), carried from the catalog (null in a catalog not yet migrated)
        ("robot_type", pa.string()),
        ("source_format", pa.string()),
        ("source_dataset", pa.string()),
        ("control_hz", pa.float64()),
        ("state_dim", pa.int32()),
        ("action_dim", pa.int32()),
        ("language", pa.string()),
        ("state_stream", pa.string()),
        ("action_stream", pa.string()),
        ("camera_roles", pa.list_(pa.string())),
    ]
)
# The columns manifests had before the mixing facts: what hash schemes v1..v3 cover (a file written
# with them holds only these); v4 covers every MANIFEST_SCHEMA column.
MANIFEST_BASE_COLUMNS = MANIFEST_SCHEMA.names[: MANIFEST_SCHEMA.get_field_index("weight") + 1]
MANIFEST_BASE_SCHEMA = pa.schema([MANIFEST_SCHEMA.field(c) for c in MANIFEST_BASE_COLUMNS])

# Parquet key-value metadata keys on every manifest file.
MANIFEST_META_CATALOG_VERSION = b"robodata.catalog_version"
MANIFEST_META_SPEC_HASH = b"robodata.spec_hash"
MANIFEST_META_CONTENT_HASH = b"robodata.manifest_hash"
# Which content-hash scheme MANIFEST_META_CONTENT_HASH follows (robodata.curate.manifest.HASH_SCHEMES);
# absent on manifests written before schemes were recorded, which use "v1".
MANIFEST_META_HASH_SCHEME = b"robodata.manifest_hash_scheme"


def type_kind(t: pa.DataType) -> str:
    """The kind of an Arrow type as catalog checks see it: null, string, bool, int, float, timestamp,
    list<kind>, else the type itself."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return "list<" + type_kind(t.value_type) + ">"
    return str(t)


def stream_rates(raw: str | None) -> dict[str, float]:
    """The rates a row's `stream_rates_json` holds: a JSON object of stream name -> finite rate
    >= 0 in Hz (0: irregular), as ingestion writes it; {} for null or "".

    Raises:
        ValueError: anything else (not JSON, not an object, a rate that is not such a number),
            saying what.
    """
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"a JSON {type(doc).__name__}, not an object of stream -> rate")
    for name, rate in doc.items():
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate < 0:
            raise ValueError(f"stream {name[:64]!r} has rate {str(rate)[:40]!r}, not a finite number >= 0")
    return {name: float(rate) for name, rate in doc.items()}
