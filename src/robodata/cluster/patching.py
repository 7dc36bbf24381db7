"""RFC 6902 JSON Patch and RFC 7386 merge patch over plain JSON documents.

Used by the loopback fake API server to apply the PATCH bodies the kubernetes client
sends, with the API server's semantics (a failed `test` op is a 422).
"""

from __future__ import annotations

import copy
from typing import Any

from robodata.errors import RobodataError


class PatchError(RobodataError):
    """A patch cannot be applied to its document; the message names the JSON pointer or op.

    `code` is the HTTP status the API server answers with: 422 for a failed `test` op or a
    path the document does not have, 400 for a malformed patch.
    """

    def __init__(self, message: str, code: int = 422):
        super().__init__(message)
        self.code = code


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(doc: Any, pointer: str) -> tuple[Any, str]:
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}", 400)
    tokens = [_unescape(t) for t in pointer[1:].split("/")]
    parent = doc
    for token in tokens[:-1]:
        parent = _child(parent, token, pointer)
    return parent, tokens[-1]


def _child(node: Any, token: str, pointer: str) -> Any:
    try:
        if isinstance(node, list):
            return node[int(token)]
        return node[token]
    except (KeyError, IndexError, ValueError, TypeError):
        raise PatchError(f"doc is missing path: {pointer!r}") from None


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations", 400)
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError(f"json patch operation must be an object, got {op!r}", 400)
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise PatchError(f"operation without a path: {op}", 400)
        parent, key = _walk(out, path)
        if isinstance(parent, list) and key != "-" and not key.isdigit():
            raise PatchError(f"invalid array index in {path!r}", 400)
        if kind == "test":
            if _child(parent, key, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed")
        elif kind == "remove":
            _child(parent, key, path)
            if isinstance(parent, list):
                del parent[int(key)]
            else:
                del parent[key]
        elif kind in ("add", "replace"):
            if kind == "replace":
                _child(parent, key, path)
            value = copy.deepcopy(op.get("value"))
            if isinstance(parent, list):
                if key == "-":
                    parent.append(value)
                elif kind == "add":
                    parent.insert(int(key), value)
                else:
                    parent[int(key)] = value
            elif isinstance(parent, dict):
                parent[key] = value
            else:
                raise PatchError(f"cannot {kind} at {path}")
        else:
            raise PatchError(f"unsupported op {kind!r}", 400)
    return out


def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out
