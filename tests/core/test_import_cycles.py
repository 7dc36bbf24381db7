"""No import circle anywhere: every file and every package of robodata, robodata_testing, the Dagster
layer (src/robodata_dagster and the folders mapped into it) and bench, counting every import in a
file's source (module level, inside functions, under TYPE_CHECKING)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# source folder -> the package it is installed as (pyproject.toml [tool.setuptools.package-dir])
ROOTS = {
    "src/robodata": "robodata",
    "src/robodata_testing": "robodata_testing",
    "src/robodata_dagster": "robodata_dagster",
    "assets": "robodata_dagster.assets",
    "resources": "robodata_dagster.resources",
    "sensors": "robodata_dagster.sensors",
    "jobs": "robodata_dagster.jobs",
    "bench": "bench",
}


def modules(roots: dict[str, str], base: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under each root (a package is its __init__)."""
    out: dict[str, Path] = {}
    mapped = {pkg.rpartition(".")[2] for pkg in roots.values() if pkg.startswith("robodata_dagster.")}
    for folder, pkg in roots.items():
        for p in sorted((base / folder).rglob("*.py")):
            parts = [x for x in p.relative_to(base / folder).with_suffix("").parts if x != "__init__"]
            if pkg == "robodata_dagster" and parts and parts[0] in mapped:
                continue  # an installed link tree's copy, if any: the mapped folder is the source
            out[".".join([pkg, *parts])] = p
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of `mods` it imports anywhere in its source. `from a import b` is an
    import of the module a.b when there is one, else of a; an unknown name is cut to its longest
    known prefix."""

    def known(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for m, path in mods.items():
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        out: set[str] = set()
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    up = package
                    for _ in range(n.level - 1):
                        up = up.rpartition(".")[0]
                    base = f"{up}.{base}" if base else up
                out |= {known(f"{base}.{a.name}") or known(base) for a in n.names}
            elif isinstance(n, ast.Import):
                out |= {known(a.name) for a in n.names}
        graph[m] = {t for t in out if t and t != m}
    return graph


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.add(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def package_of(module: str) -> str:
    """robodata.ingest.x -> robodata.ingest; robodata_dagster.assets.x -> robodata_dagster.assets;
    a top-level module of robodata (robodata.cli) is its own; bench modules are their own files."""
    parts = module.split(".")
    return module if parts[0] == "bench" else ".".join(parts[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        pa = package_of(a)
        out.setdefault(pa, set())
        for b in targets:
            pb = package_of(b)
            if pb != pa and pb != pa.split(".")[0]:  # a package's use of its root's modules is not a circle
                out[pa].add(pb)
    return out


def _show(found: Iterable[frozenset[str]]) -> list[list[str]]:
    return sorted(sorted(c) for c in found)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(modules(ROOTS, REPO))


def test_no_file_circle(graph):
    assert len(graph) > 300
    assert _show(circles(graph)) == [], "import circle(s) between files"


def test_no_package_circle(graph):
    assert _show(circles(package_graph(graph))) == [], "import circle(s) between packages"


def test_a_circle_made_on_purpose_is_found(tmp_path):
    """Two files importing each other, one lazily and one only for types, and a package pair."""
    pkg = tmp_path / "src" / "robodata"
    for sub in ("alpha", "beta"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "alpha" / "one.py").write_text("def f():\n    from robodata.alpha import two\n")
    (pkg / "alpha" / "two.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .one import f\n"
        "from robodata.beta.three import g\n"
    )
    (pkg / "beta" / "three.py").write_text("def g():\n    import robodata.alpha.one\n")
    g = import_graph(modules({"src/robodata": "robodata"}, tmp_path))
    assert circles(g) == {frozenset({"robodata.alpha.one", "robodata.alpha.two", "robodata.beta.three"})}
    assert circles(package_graph(g)) == {frozenset({"robodata.alpha", "robodata.beta"})}


def test_recovery_reaches_the_cache_through_its_narrow_site_only():
    tree = ast.parse((REPO / "src" / "robodata" / "cache" / "recovery.py").read_text())
    private = [
        f"{ast.unparse(n)}:{n.lineno}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
    ]
    assert private == []  # no private attribute of the cache (or of anything else)


def test_the_catalog_never_imports_curation(graph):
    """The budget order belongs to the catalog (robodata.catalog.order); curation imports it."""
    catalog = {m: sorted(t for t in targets if package_of(t) == "robodata.curate") for m, targets in graph.items()}
    catalog = {m: found for m, found in catalog.items() if package_of(m) == "robodata.catalog"}
    assert len(catalog) > 5 and not any(catalog.values()), catalog
    assert any(package_of(t) == "robodata.catalog" for t in graph["robodata.curate.ordered"])
