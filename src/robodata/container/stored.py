"""A stream-copied camera's packets as stored, whole: what the copy's verification reads back and
what an export remuxes (robodata.ingest.copy_verify, robodata.export.lerobot_remux)."""

from __future__ import annotations

import pyarrow as pa

from robodata.container.reader import EpisodeReader

_ALL = (-(1 << 63) + 1, (1 << 63) - 1)  # every time a part can hold


def stored_packets(reader: EpisodeReader, cam: str) -> pa.Table:
    """The camera's packets as stored (pts, dts, key, t_ns, data), in decode order; a table of no
    rows (a pts column alone) when it stores none."""
    tables = [reader.part_table(ch, p, blob) for ch, p, blob in reader.fetch_parts({cam: _ALL})]
    return pa.concat_tables(tables) if tables else pa.table({"pts": pa.array([], pa.int64())})
