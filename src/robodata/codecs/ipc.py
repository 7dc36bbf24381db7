"""Arrow IPC streams for container parts, decoded within a memory budget.

A part is one Arrow IPC stream: a schema message and record batches whose body buffers may be
zstd-compressed (each then starts with its int64 uncompressed length). Arrow allocates that
declared length before it decompresses, so a few KB can ask for GBs. `read_ipc` first walks the
messages (pyarrow's MessageReader verifies each flatbuffer) and adds up what decoding will
allocate: the length every compressed buffer declares, checked against the content size its
zstd frame declares, or the buffer's own length. Only a stream within the caller's budget is
decoded, and the result is validated in full.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa
import zstandard

from robodata.errors import CodecError, DecodeLimitError

_ZSTD_OPTS = pa.ipc.IpcWriteOptions(compression="zstd")
_PLAIN_OPTS = pa.ipc.IpcWriteOptions()
_RECORD_BATCH = 3  # MessageHeader union tag (Schema=1, DictionaryBatch=2, RecordBatch=3)
_ZSTD = 1  # CompressionType.ZSTD (LZ4_FRAME=0)


class DecodeBudget:
    """Bytes one read may still decode; each decoder takes its share before it allocates."""

    def __init__(self, limit: int, knob: str, basis: str = ""):
        self.limit = int(limit)
        self.left = int(limit)
        self.knob = knob  # the config field that sets the limit, for the message
        self.basis = basis  # how the limit was derived, for the message

    def take(self, n: int, what: str) -> None:
        """Take n bytes. Raises DecodeLimitError when fewer are left (nothing is taken then)."""
        if n > self.left:
            basis = f": {self.basis}" if self.basis else ""
            raise DecodeLimitError(
                f"{what} would decode {n:,} bytes, over what is left of the decode-memory cap "
                f"({self.left:,} of {self.limit:,} bytes{basis}); read a shorter window or raise {self.knob}"
            )
        self.left -= n


@dataclass(frozen=True)
class IpcInfo:
    rows: int
    decoded_bytes: int  # what Arrow allocates to decode the record batches


def to_ipc(table: pa.Table, compress: bool = True) -> bytes:
    return bytes(to_ipc_view(table, compress))


def to_ipc_view(table: pa.Table, compress: bool = True) -> memoryview:
    """The IPC stream as a view of Arrow's buffer (no copy into a bytes object: a video part is
    megabytes of packets, written and checksummed as they are)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_ZSTD_OPTS if compress else _PLAIN_OPTS) as w:
        w.write_table(table)
    return memoryview(sink.getvalue())


def read_ipc(data: bytes, budget: DecodeBudget | None = None, what: str = "part", rows: int | None = None) -> pa.Table:
    """Decode one IPC stream, refusing it before any allocation when it is over `budget` or its
    batches declare other than `rows` rows (the part's index entry; None: not checked).

    Raises:
        CodecError: not a single-schema IPC stream of record batches, inconsistent sizes, other
            than `rows` rows, or buffers that fail validation.
        DecodeLimitError: decoding would allocate more than `budget` has left.
    """
    schema, batches, info = _messages(data)
    if rows is not None and info.rows != rows:
        raise CodecError(f"{what}: its batches declare {info.rows} rows, its index entry says {rows}")
    if budget is not None:
        budget.take(info.decoded_bytes, what)
    try:
        table = pa.Table.from_batches([pa.ipc.read_record_batch(m, schema) for m in batches], schema=schema)
        table.validate(full=True)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise CodecError(f"{what}: Arrow IPC body does not decode: {exc}") from None
    if table.num_rows != info.rows:
        raise CodecError(f"{what}: decoded {table.num_rows} rows, the batches declare {info.rows}")
    return table


def ipc_info(data: bytes) -> IpcInfo:
    """Rows and decode size of an IPC stream, from its message headers alone (nothing decompressed)."""
    return _messages(data)[2]


def _messages(data: bytes) -> tuple[pa.Schema, list[pa.ipc.Message], IpcInfo]:
    try:
        reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(data))
        messages = []
        while True:
            try:
                messages.append(reader.read_next_message())
            except StopIteration:
                break
        if not messages or messages[0].type != "schema":
            raise CodecError("not an Arrow IPC stream (no schema message first)")
        schema = pa.ipc.read_schema(messages[0])
    except CodecError:
        raise
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise CodecError(f"not a readable Arrow IPC stream: {exc}") from None
    batches = messages[1:]
    rows = size = 0
    for m in batches:
        if m.type != "record batch":
            raise CodecError(f"unexpected IPC message {m.type!r} (parts hold record batches only)")
        r, n = _batch_size(bytes(m.metadata), m.body)
        rows += r
        size += n
    return schema, batches, IpcInfo(rows, size)


# ----------------------------------------------------------------- flatbuffers (Message.fbs)
def _u(fmt: str, buf: bytes | memoryview, pos: int) -> int:
    try:
        return struct.unpack_from(fmt, buf, pos)[0]
    except struct.error:
        raise CodecError("IPC message header is truncated") from None


def _field(buf: bytes, table: int, i: int) -> int | None:
    """Absolute position of field i of the flatbuffer table at `table`, None when absent."""
    vt = table - _u("<i", buf, table)
    if not 0 <= 4 + 2 * i < _u("<H", buf, vt):
        return None
    off = _u("<H", buf, vt + 4 + 2 * i)
    return table + off if off else None


def _ref(buf: bytes, pos: int | None) -> int | None:
    return None if pos is None else pos + _u("<I", buf, pos)


def _batch_size(meta: bytes, body: pa.Buffer | None) -> tuple[int, int]:
    """(rows, bytes Arrow allocates) of one record-batch message, read from its flatbuffer."""
    msg = _u("<I", meta, 0)
    kind = _field(meta, msg, 1)
    if kind is None or _u("<B", meta, kind) != _RECORD_BATCH:
        raise CodecError("IPC record batch message without a RecordBatch header")
    rb = _ref(meta, _field(meta, msg, 2))
    if rb is None:
        raise CodecError("IPC record batch message without a RecordBatch header")
    length = _field(meta, rb, 0)
    rows = 0 if length is None else _u("<q", meta, length)
    if rows < 0:
        raise CodecError(f"IPC record batch declares {rows} rows")
    comp = _ref(meta, _field(meta, rb, 3))
    compressed = comp is not None
    if comp is not None:
        codec = _field(meta, comp, 0)
        if (0 if codec is None else _u("<b", meta, codec)) != _ZSTD:
            raise CodecError("IPC body compression is not zstd")
    vec = _ref(meta, _field(meta, rb, 2))
    count = 0 if vec is None else _u("<I", meta, vec)
    raw = memoryview(b"" if body is None else body)  # no copy
    total = 0
    for k in range(count):
        at = vec + 4 + 16 * k  # type: ignore[operator]
        off, n = _u("<q", meta, at), _u("<q", meta, at + 8)
        if off < 0 or n < 0 or off + n > len(raw):
            raise CodecError(f"IPC buffer {k} ({off}+{n}) lies outside the message body ({len(raw)} bytes)")
        total += _buffer_size(raw, off, n, k) if compressed else n
    return rows, total


def _buffer_size(raw: memoryview, off: int, n: int, k: int) -> int:
    """Bytes a compressed IPC buffer decodes to: its declared length, checked against its zstd frame."""
    if n == 0:
        return 0
    if n < 8:
        raise CodecError(f"IPC buffer {k} is {n} bytes, too short for its length prefix")
    declared = _u("<q", raw, off)
    if declared == -1:  # stored uncompressed
        return n - 8
    if declared < 0:
        raise CodecError(f"IPC buffer {k} declares {declared} uncompressed bytes")
    try:
        content = zstandard.frame_content_size(raw[off + 8 : off + n])
    except zstandard.ZstdError as exc:
        raise CodecError(f"IPC buffer {k} is not a zstd frame: {exc}") from None
    if content not in (-1, declared):  # -1: the frame does not say
        raise CodecError(f"IPC buffer {k}: zstd frame holds {content} bytes, its prefix declares {declared}")
    return declared
