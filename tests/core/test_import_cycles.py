"""Modules that once imported each other no longer do (at module level, lazily or for types)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def imports(module: str) -> set[str]:
    """Every robodata module `module` imports, anywhere in its source."""
    tree = ast.parse((SRC / (module.replace(".", "/") + ".py")).read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("robodata")}


@pytest.mark.parametrize(
    "a, b",
    [
        ("robodata.cache.pagecache", "robodata.cache.recovery"),
        ("robodata.train.data", "robodata.train.manifest_source"),
    ],
)
def test_no_cycle_between(a, b):
    assert not (b in imports(a) and a in imports(b)), f"{a} and {b} import each other"


def test_recovery_reaches_the_cache_through_its_narrow_site_only():
    tree = ast.parse((SRC / "robodata" / "cache" / "recovery.py").read_text())
    private = [
        f"{ast.unparse(n)}:{n.lineno}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
    ]
    assert private == []  # no private attribute of the cache (or of anything else)
