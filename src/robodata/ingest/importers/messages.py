"""Read messages from an MCAP file (JSON, ROS 2 CDR or protobuf encoded) or a ROS 2 bag directory.

Yields (topic, schema_name, log_time_ns, message) where message is a dict (JSON) or a
rosbags message object; `field()` reads a dotted path from either.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Iterator
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from robodata.codecs.image import Image, ImageError, decode_jpeg_bytes
from robodata.ingest import format_kinds
from robodata.ingest.importers.typestores import Choice, Ros, define_private, new_store, shared
from robodata.ingest.raw import RawEpisodeError

Message = tuple[str, str, int, Any]


def field(msg: Any, path: str, default: Any = None) -> Any:
    cur = msg
    for part in path.split("."):
        if cur is None:
            return default
        cur = cur.get(part) if isinstance(cur, dict) else getattr(cur, part, None)
    return default if cur is None else cur


def stamp_ns(msg: Any) -> int | None:
    """header.stamp (ROS: sec/nanosec) or timestamp (foxglove JSON: sec/nsec; protobuf: seconds/nanos),
    ns; None if absent."""
    st = field(msg, "header.stamp") or field(msg, "timestamp")
    if st is None:
        return None
    sec = field(st, "sec", None)
    if sec is None:
        sec = field(st, "seconds", 0)  # protobuf google.protobuf.Timestamp
    nsec = next((v for k in ("nanosec", "nsec", "nanos") if (v := field(st, k)) is not None), 0)
    return int(sec) * 1_000_000_000 + int(nsec)


def unknown_type(path: Path, topic: str, msgtype: str) -> RawEpisodeError:
    return RawEpisodeError(
        f"{path}: topic {topic!r}: message type {msgtype!r} is unknown: the recording embeds no definition "
        f"for it; pass its .msg/.idl files with `robodata ingest --msgs DIR` (IngestSettings.msgs)"
    )


class _Cdr:
    """CDR messages of one MCAP file: the shared ROS 2 store (robodata.ingest.importers.typestores),
    or a store of its own from the first type the file defines differently."""

    def __init__(self, msgs: str = ""):
        self.msgs, self.shared = msgs, shared("ros2", msgs)
        self.store, self.private = self.shared.store, False
        self.defs: dict[str, str] = {}  # schema name -> the definition this file gave ("" none)

    def decode(self, schema_name: str, schema_data: bytes, data: bytes, path: Path, topic: str):
        if schema_name not in self.defs:
            self._define(schema_name, schema_data.decode() if schema_data else "", path, topic)
        return self.store.deserialize_cdr(data, schema_name)

    def _define(self, name: str, text: str, path: Path, topic: str) -> None:
        from rosbags.typesys import get_types_from_msg

        parse = partial(get_types_from_msg, text, name)
        verdict = (
            define_private(self.store, name, text, parse) if self.private else self.shared.ensure(name, text, parse)
        )
        if verdict == "conflict":  # from here on a store of this file's own: its earlier types first
            self.store, self.private = new_store("ros2", self.msgs), True
            for n, t in self.defs.items():
                define_private(self.store, n, t, partial(get_types_from_msg, t, n))
            verdict = define_private(self.store, name, text, parse)
        if verdict == "unknown":
            raise unknown_type(path, topic, name)
        self.defs[name] = text


class _Protobuf:
    """Protobuf messages of one MCAP file: a class per schema, from the FileDescriptorSet it embeds."""

    def __init__(self) -> None:
        self.classes: dict[int, Any] = {}

    def decode(self, schema, data: bytes) -> Any:
        cls = self.classes.get(schema.id)
        if cls is None:
            from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

            pool = descriptor_pool.DescriptorPool()
            files = list(descriptor_pb2.FileDescriptorSet.FromString(schema.data).file)
            while files:  # dependencies first, in whatever order the set lists them
                ready = [f for f in files if all(_has_file(pool, d) for d in f.dependency)]
                if not ready:
                    raise ValueError(f"schema {schema.name!r}: its descriptor set lacks {files[0].dependency}")
                for f in ready:
                    pool.Add(f)
                files = [f for f in files if f not in ready]
            cls = self.classes[schema.id] = message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.name))
        return cls.FromString(data)


def _has_file(pool, name: str) -> bool:
    try:
        pool.FindFileByName(name)
        return True
    except KeyError:
        return False


def iter_mcap(path: Path, topics: set[str] | None = None, msgs: str = "") -> Iterator[Message]:
    from mcap.reader import make_reader

    cdr: _Cdr | None = None
    proto: _Protobuf | None = None
    try:
        with open(path, "rb") as f:
            reader = make_reader(f)
            for schema, channel, message in reader.iter_messages(topics=list(topics) if topics else None):
                enc = channel.message_encoding
                name = schema.name if schema else ""
                if enc == "json":
                    msg = json.loads(message.data)
                elif enc == "cdr":
                    cdr = cdr or _Cdr(msgs)
                    msg = cdr.decode(name, schema.data if schema else b"", message.data, path, channel.topic)
                elif enc == "protobuf" and schema is not None:
                    proto = proto or _Protobuf()
                    msg = proto.decode(schema, message.data)
                else:
                    raise RawEpisodeError(f"{path}: topic {channel.topic}: unsupported message encoding {enc!r}")
                yield channel.topic, name, int(message.log_time), msg
    except RawEpisodeError:
        raise
    except Exception as exc:  # mcap raises EndOfFile / InvalidMagic / RecordLengthLimitExceeded ...
        raise RawEpisodeError(f"{path}: truncated or corrupt MCAP ({type(exc).__name__}: {exc})") from None


def _definition(conn) -> tuple[str, Callable[[], dict]]:
    """A bag connection's own definition of its type ("" when it embeds none) and its parser."""
    text = conn.msgdef.data if conn.msgdef else ""

    def parse() -> dict:
        from rosbags.typesys import get_types_from_idl, get_types_from_msg

        if getattr(conn.msgdef.format, "name", "MSG") == "IDL":
            return get_types_from_idl(text)
        return get_types_from_msg(text, conn.msgtype)

    return text, parse


def _bag_store(ros: Ros, msgs: str, conns: list, path: Path, choice: Choice = ()) -> Any:
    """The shared store with every connection's type, or the bag's own store on a conflict."""
    sh, store = shared(ros, msgs, choice), None
    for c in conns:
        verdict = sh.ensure(c.msgtype, *_definition(c))
        if verdict == "unknown":
            raise unknown_type(path, c.topic, c.msgtype)
        if verdict == "conflict":
            store = new_store(ros, msgs, choice)
            break
    if store is None:
        return sh.store
    for c in conns:
        if define_private(store, c.msgtype, *_definition(c)) == "unknown":
            raise unknown_type(path, c.topic, c.msgtype)
    return store


def iter_bag_dir(path: Path, topics: set[str] | None = None, msgs: str = "") -> Iterator[Message]:
    """A ROS 2 bag folder (rosbags.rosbag2); types not embedded come from `msgs`."""
    from rosbags.rosbag2 import Reader

    return _iter_rosbag(path, topics, Reader, "ros2", msgs)


def iter_bag1(path: Path, topics: set[str] | None = None, msgs: str = "") -> Iterator[Message]:
    """A ROS 1 bag (rosbags.rosbag1): types from the bag's own definitions (ROS 1 bags embed them)."""
    from rosbags.rosbag1 import Reader

    return _iter_rosbag(path, topics, Reader, "ros1", msgs)


def _reader_cls(ros: Ros):
    from rosbags.rosbag1 import Reader as Reader1
    from rosbags.rosbag2 import Reader as Reader2

    return Reader1 if ros == "ros1" else Reader2


def _iter_rosbag(path: Path, topics: set[str] | None, reader_cls, ros: Ros, msgs: str) -> Iterator[Message]:
    try:
        choice = chosen_definitions(path, ros, msgs)[0]
        with reader_cls(path) as reader:
            conns = [c for c in reader.connections if topics is None or c.topic in topics]
            store = _bag_store(ros, msgs, conns, path, choice)
            deserialize = store.deserialize_ros1 if ros == "ros1" else store.deserialize_cdr
            for conn, t, raw in reader.messages(connections=conns):
                try:
                    msg = deserialize(raw, conn.msgtype)
                except Exception as exc:  # rosbags' SerdeError: the definition is not the recording's
                    raise undecodable(path, conn, ros, msgs, choice, exc) from None
                yield conn.topic, conn.msgtype, int(t), msg
    except RawEpisodeError:
        raise
    except Exception as exc:
        what = "ROS 1 bag" if ros == "ros1" else "ROS 2 bag"
        raise RawEpisodeError(f"{path}: unreadable {what} ({type(exc).__name__}: {exc})") from None


def undecodable(path: Path, conn, ros: Ros, msgs: str, choice: Choice, exc: Exception) -> RawEpisodeError:
    """A message that its type's definition does not decode: the type and where the definition came from."""
    from robodata.ingest.importers.msgdefs import load_msgdefs

    t = conn.msgtype
    files = load_msgdefs(msgs).files(t) if msgs else []
    if files:
        used = files[dict(choice).get(t, 0)]
        src = f"the definition in {used}" + (f" (candidates: {', '.join(files)})" if len(files) > 1 else "")
    elif _definition(conn)[0]:
        src = "the definition the recording embeds"
    else:
        src = f"{'ROS 1 Noetic' if ros == 'ros1' else 'ROS 2 Humble'}'s built-in definition"
    return RawEpisodeError(
        f"{path}: topic {conn.topic!r}: message of type {t!r} does not decode with {src} "
        f"({type(exc).__name__}: {exc}); give the definition the recording was written with under --msgs "
        "(one subfolder per version of the type: docs/ingestion.md)"
    )


SAMPLE = 8  # messages of each topic a candidate definition must decode to be chosen


def chosen_definitions(path: Path, ros: Ros, msgs: str) -> tuple[Choice, tuple[str, ...]]:
    """For the types `msgs` defines several times (robodata.ingest.importers.msgdefs): the
    candidates this recording decodes by, and notes `msgdef:<type>: <file>` naming them."""
    if not msgs:
        return (), ()
    from robodata.ingest.importers.msgdefs import load_msgdefs

    if not load_msgdefs(msgs).ambiguous():
        return (), ()
    st = path.stat()
    return _chosen(str(path), (st.st_mtime_ns, st.st_size), ros, msgs)


@lru_cache(maxsize=256)
def _chosen(path_s: str, stamp: tuple[int, int], ros: Ros, msgs: str) -> tuple[Choice, tuple[str, ...]]:
    from robodata.ingest.importers.msgdefs import load_msgdefs

    path, defs = Path(path_s), load_msgdefs(msgs)
    with _reader_cls(ros)(path) as reader:
        conns = list(reader.connections)
        types = defs.involved({c.msgtype for c in conns})
        if not types:
            return (), ()
        tried: list[str] = []
        for choice in defs.choices(types):
            key: Choice = tuple(sorted(choice.items()))
            failed = _first_failure(reader, conns, defs, types, shared(ros, msgs, key).store, ros)
            if failed is None:
                notes = tuple(f"msgdef:{t}: {defs.files(t)[i]}" for t, i in key)
                return key, notes
            tried.append(f"{', '.join(defs.files(t)[i] for t, i in key)}: {failed}")
    raise RawEpisodeError(
        f"{path}: no candidate definition of {', '.join(types)} under --msgs {msgs} decodes the recording's "
        f"first messages; tried {'; '.join(tried)}"
    )


def _first_failure(reader, conns: list, defs, types: list[str], store, ros: Ros) -> str | None:
    """None when the first SAMPLE messages of every topic whose type involves `types` decode."""
    deserialize = store.deserialize_ros1 if ros == "ros1" else store.deserialize_cdr
    for c in conns:
        if not set(defs.involved({c.msgtype})) & set(types):
            continue
        for i, (_, _, raw) in enumerate(itertools.islice(reader.messages(connections=[c]), SAMPLE)):
            try:
                deserialize(raw, c.msgtype)
            except Exception as exc:  # rosbags' SerdeError
                return f"topic {c.topic!r} message {i}: {type(exc).__name__}: {exc}"
    return None


def iter_messages(path: Path, topics: set[str] | None = None, msgs: str = "") -> Iterator[Message]:
    """Every message, or those of `topics` (an empty set: none; rosbags and mcap read all for it)."""
    if topics is not None and not topics:
        return iter(())
    if path.is_dir():
        return iter_bag_dir(path, topics, msgs)
    if path.suffix.lower() == ".bag":
        return iter_bag1(path, topics, msgs)
    return iter_mcap(path, topics, msgs)


def recording_kind(path: Path) -> str:
    """The format kind of the recording `iter_messages` reads at `path` (by the same rule)."""
    if path.is_dir():
        return format_kinds.ROS2_BAG
    return format_kinds.ROS1_BAG if path.suffix.lower() == ".bag" else format_kinds.MCAP


def definitions_used(path: Path, msgs: str = "") -> list[str]:
    """Notes `msgdef:<type>: <file>` naming the `--msgs` candidates a bag decodes by (types defined
    once: none)."""
    if path.is_dir():
        return list(chosen_definitions(path, "ros2", msgs)[1])
    if path.suffix.lower() == ".bag":
        return list(chosen_definitions(path, "ros1", msgs)[1])
    return []


def mcap_metadata(path: Path, name: str) -> dict[str, str]:
    if path.is_dir():
        return {}
    from mcap.reader import make_reader

    try:
        with open(path, "rb") as f:
            for rec in make_reader(f).iter_metadata():
                if rec.name == name:
                    return dict(rec.metadata)
    except Exception:  # a truncated file fails again, with a clear message, when messages are read
        return {}
    return {}


def decode_image(schema: str, msg: Any, where: str) -> Image:
    """CompressedImage (JPEG/PNG; JSON base64 or bytes) or raw Image (rgb8/bgr8/mono8) -> an
    Image: a JPEG stays the decoder's YUV frame, everything else becomes RGB uint8."""
    if "CompressedImage" in schema or field(msg, "format") is not None and field(msg, "encoding") is None:
        data = field(msg, "data")
        data = base64.b64decode(data) if isinstance(data, str) else bytes(data)
        try:
            return decode_jpeg_bytes(data)  # falls back to PIL for PNG and what libavcodec refuses
        except ImageError as exc:
            raise RawEpisodeError(f"{where}: undecodable compressed image ({exc})") from None
    h, w, enc = int(field(msg, "height", 0)), int(field(msg, "width", 0)), str(field(msg, "encoding", ""))
    data = field(msg, "data")
    buf = np.frombuffer(base64.b64decode(data) if isinstance(data, str) else bytes(data), np.uint8)
    step = int(field(msg, "step", 0)) or w * (1 if enc == "mono8" else 3)
    try:
        rows = buf.reshape(h, step)
        if enc in ("rgb8", "bgr8"):
            img = rows[:, : w * 3].reshape(h, w, 3)
            return np.ascontiguousarray(img[..., ::-1] if enc == "bgr8" else img)
        if enc == "mono8":
            return np.repeat(rows[:, :w, None], 3, axis=2)
    except ValueError as exc:
        raise RawEpisodeError(f"{where}: image data does not match {w}x{h} {enc} ({exc})") from None
    raise RawEpisodeError(f"{where}: unsupported image encoding {enc!r}")
