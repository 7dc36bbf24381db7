"""A loopback Kubernetes API server over recorded objects, for tests and benches.

Serves Nodes, Pods and Leases with the real API's paths, list envelopes (paging with
`limit`/`continue`), label and field selectors, PATCH (json-patch, merge-patch;
strategic-merge is applied as a merge patch), DELETE with `DeleteOptions`
preconditions, finalizers and graceful deletion, and `Status` error bodies. Every
request is logged so tests can assert what the real `kubernetes` client sent.
Binds 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from robodata.cluster.patching import PatchError, apply_json_patch, apply_merge_patch

RESOURCES = {  # plural -> (group/version, kind, namespaced)
    "nodes": ("v1", "Node", False),
    "pods": ("v1", "Pod", True),
    "leases": ("coordination.k8s.io/v1", "Lease", True),
}
_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+/[^/]+))(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?$"
)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class FakeStore:
    """Objects by (plural, namespace, name); a global resourceVersion counter."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.rv = 1000
        self.lock = threading.RLock()

    def load_list(self, path: str | Path) -> None:
        data = json.loads(Path(path).read_text())
        plural = {v[1] + "List": k for k, v in RESOURCES.items()}[data["kind"]]
        for item in data["items"]:
            self.put(plural, item, bump=False)

    def put(self, plural: str, obj: dict[str, Any], bump: bool = True) -> dict[str, Any]:
        with self.lock:
            meta = obj["metadata"]
            if bump or "resourceVersion" not in meta:
                self.rv += 1
                meta["resourceVersion"] = str(self.rv)
            self.objects[(plural, meta.get("namespace", ""), meta["name"])] = obj
            return obj

    def get(self, plural: str, ns: str, name: str) -> dict[str, Any]:
        obj = self.objects.get((plural, ns, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
        return obj

    def shift_times(self, delta: timedelta) -> None:
        """Move every timestamp by `delta`, so recorded objects sit relative to a new 'now'."""
        with self.lock:
            for obj in self.objects.values():
                _shift(obj, delta)

    def items(self, plural: str, ns: str | None = None) -> list[dict[str, Any]]:
        keys = sorted(k for k in self.objects if k[0] == plural and (ns is None or k[1] == ns))
        return [self.objects[k] for k in keys]


_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def _shift(node: Any, delta: timedelta) -> None:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        if isinstance(value, str) and _TIME.match(value):
            t = datetime.fromisoformat(value.replace("Z", "+00:00")) + delta
            fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if "." in value else "%Y-%m-%dT%H:%M:%SZ"
            node[key] = t.astimezone(UTC).strftime(fmt)
        else:
            _shift(value, delta)


def _field(obj: dict[str, Any], dotted: str) -> str:
    node: Any = obj
    for part in dotted.split("."):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return "" if node == {} or node is None else str(node)


def _matches(obj: dict[str, Any], labels: str | None, fields: str | None) -> bool:
    obj_labels = obj["metadata"].get("labels", {})
    for term in filter(None, (labels or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if obj_labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if obj_labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in obj_labels:
                return False
        elif term.strip() not in obj_labels:
            return False
    for term in filter(None, (fields or "").split(",")):
        neg = "!=" in term
        k, v = term.replace("==", "=").split("!=" if neg else "=", 1)
        if (_field(obj, k.strip()) == v.strip()) == neg:
            return False
    return True


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeApiServer:
    def __init__(self, store: FakeStore | None = None):
        self.store = store or FakeStore()
        self.requests: list[Request] = []
        self.fail: dict[tuple[str, str], int] = {}  # (method, path) -> HTTP code to return once
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @classmethod
    def from_fixtures(cls, *paths: str | Path) -> FakeApiServer:
        store = FakeStore()
        for p in paths:
            store.load_list(p)
        return cls(store)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def mutations(self) -> list[Request]:
        return [r for r in self.requests if r.method in ("PATCH", "DELETE", "POST", "PUT")]

    # -- request handling ----------------------------------------------------------------
    def handle(self, req: Request) -> tuple[int, dict[str, Any]]:
        self.requests.append(req)
        code = self.fail.pop((req.method, req.path), None)
        if code:
            raise ApiError(code, "InternalError", "injected failure")
        m = _PATH.match(req.path)
        if not m or m["plural"] not in RESOURCES:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({req.path})")
        plural, ns, name = m["plural"], m["ns"], m["name"]
        api_version, kind, namespaced = RESOURCES[plural]
        if (m["group"] or "v1") != api_version or (ns is not None and not namespaced):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({req.path})")
        with self.store.lock:
            if name is None and req.method == "GET":
                return 200, self._list(plural, ns, req.query)
            if name is None:
                raise ApiError(405, "MethodNotAllowed", f"{req.method} on a collection is not supported here")
            key_ns = ns or ""
            if req.method == "GET":
                return 200, self._full(plural, self.store.get(plural, key_ns, name))
            if req.method == "PATCH":
                return 200, self._patch(plural, key_ns, name, req)
            if req.method == "DELETE":
                return 200, self._delete(plural, key_ns, name, req)
        raise ApiError(405, "MethodNotAllowed", f"method {req.method} not allowed")

    def _full(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        api_version, kind, _ = RESOURCES[plural]
        return {"apiVersion": api_version, "kind": kind, **copy.deepcopy(obj)}

    def _list(self, plural: str, ns: str | None, q: dict[str, str]) -> dict[str, Any]:
        api_version, kind, _ = RESOURCES[plural]
        items = [o for o in self.store.items(plural, ns) if _matches(o, q.get("labelSelector"), q.get("fieldSelector"))]
        start = int(base64.b64decode(q["continue"]).decode()) if q.get("continue") else 0
        limit = int(q.get("limit") or 0)
        end = start + limit if limit else len(items)
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if end < len(items):
            meta["continue"] = base64.b64encode(str(end).encode()).decode()
            meta["remainingItemCount"] = len(items) - end
        return {
            "apiVersion": api_version,
            "kind": kind + "List",
            "metadata": meta,
            "items": copy.deepcopy(items[start:end]),
        }

    def _patch(self, plural: str, ns: str, name: str, req: Request) -> dict[str, Any]:
        current = self.store.get(plural, ns, name)
        ctype = (req.content_type or "").split(";")[0].strip()
        try:
            if ctype == "application/json-patch+json":
                patched = apply_json_patch(current, req.body)
            elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                want_rv = (req.body.get("metadata") or {}).get("resourceVersion")
                if want_rv is not None and want_rv != current["metadata"]["resourceVersion"]:
                    raise ApiError(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {plural} "{name}": '
                        "the object has been modified; please apply your changes to the latest version",
                    )
                patched = apply_merge_patch(current, req.body)
            else:
                raise ApiError(
                    415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}"
                )
        except PatchError as exc:
            reason = "Invalid" if exc.code == 422 else "BadRequest"
            raise ApiError(exc.code, reason, str(exc)) from None
        if patched["metadata"].get("uid") != current["metadata"].get("uid") or patched["metadata"]["name"] != name:
            raise ApiError(422, "Invalid", "metadata.uid and metadata.name are immutable")
        if req.query.get("dryRun") == "All":
            return self._full(plural, patched)
        if patched["metadata"].get("deletionTimestamp") and not patched["metadata"].get("finalizers"):
            del self.store.objects[(plural, ns, name)]
            return self._full(plural, patched)
        return self._full(plural, self.store.put(plural, patched))

    def _delete(self, plural: str, ns: str, name: str, req: Request) -> dict[str, Any]:
        current = self.store.get(plural, ns, name)
        opts = req.body if isinstance(req.body, dict) else {}
        pre = opts.get("preconditions") or {}
        meta = current["metadata"]
        for field_name, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if pre.get(field_name) and pre[field_name] != meta.get(field_name):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: {label} in precondition: {pre[field_name]}, "
                    f"{label} in object meta: {meta.get(field_name)}",
                )
        grace = opts.get("gracePeriodSeconds", req.query.get("gracePeriodSeconds"))
        grace = None if grace is None else int(grace)
        if req.query.get("dryRun") == "All":
            return self._status_or_obj(plural, current)
        graceful = (
            plural == "pods" and grace != 0 and current.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        )
        if meta.get("finalizers") or graceful:
            obj = copy.deepcopy(current)
            obj["metadata"].setdefault("deletionTimestamp", _now())
            obj["metadata"]["deletionGracePeriodSeconds"] = grace if grace is not None else 30
            return self._full(plural, self.store.put(plural, obj))
        del self.store.objects[(plural, ns, name)]
        return self._status_or_obj(plural, current)

    def _status_or_obj(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        if plural == "pods":  # pod deletion returns the object, like the real API
            return self._full(plural, obj)
        api_version, kind, _ = RESOURCES[plural]
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": obj["metadata"]["name"],
                "group": api_version.rpartition("/")[0],
                "kind": plural,
                "uid": obj["metadata"].get("uid"),
            },
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                    code, payload = server.handle(
                        Request(self.command, parts.path, query, self.headers.get("Content-Type"), body)
                    )
                except json.JSONDecodeError as exc:
                    code, payload = 400, _status(400, "BadRequest", f"invalid JSON body: {exc}")
                except ApiError as exc:
                    code, payload = exc.code, _status(exc.code, exc.reason, exc.message)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _serve

        return Handler


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
