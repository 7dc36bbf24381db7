"""robodata.storage.StateRoot is the one place that knows where state lives under a root: no other
file of src/ or of the Dagster folders spells a path under a state root itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robodata.names import UnsafeNameError
from robodata.storage import StateRoot, StorageLocation

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("src", "assets", "resources", "sensors", "jobs")
OWNER = REPO / "src" / "robodata" / "storage" / "state.py"
# the folders StateRoot places directly under a root
TOP = r"(?:landing|ingest|containers|catalog|manifests)\b"
ROOTISH = r"[\w.()\[\]'\"]*root[\w.()\[\]'\"]*"  # root, self.root, paths.root, storage_root(x), args.root, ...
PATTERNS = [
    re.compile(r"\{" + ROOTISH + r"[^}]*\}/" + TOP, re.I),  # f"{root}/catalog/...", f"{root.rstrip('/')}/landing"
    re.compile(ROOTISH + r"\s*/\s*[\"']" + TOP, re.I),  # root / "landing"
    re.compile(r"join\(\s*" + ROOTISH + r"\s*,\s*[\"']" + TOP, re.I),  # os.path.join(root, "catalog")
    re.compile(r"\.join\(\s*[\"']" + TOP),  # location.join("ingest", ...)
    re.compile(r"[\"']" + TOP + r"/(?:episodes|site_acceptance|refs|batches|manual_cursor)"),  # "catalog/episodes"
]


def offenders(files: list[Path]) -> list[str]:
    out = []
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if any(p.search(code) for p in PATTERNS):
                out.append(f"{f.relative_to(REPO)}:{i}: {line.strip()}")
    return out


def test_no_path_under_a_state_root_outside_state_root():
    files = [p for folder in FOLDERS for p in sorted((REPO / folder).rglob("*.py")) if p != OWNER]
    assert len(files) > 100
    assert offenders(files) == []


@pytest.mark.parametrize(
    "line",
    [
        'uri = f"{storage_root(self.root)}/catalog/episodes"',
        "cursor = f\"{paths.root.rstrip('/')}/ingest/manual_cursor.json\"",
        'landing = root / "landing"',
        'out = os.path.join(root, "manifests")',
        'self.location.join("containers", batch)',
        'CURSOR = "ingest/manual_cursor.json"',
    ],
)
def test_the_rule_finds_a_path_spelled_on_purpose(tmp_path, line):
    f = REPO / "src" / "_probe_state_root.py"  # relative_to(REPO) must hold; written and removed here
    try:
        f.write_text(f"def g(root, self, paths, os, storage_root, batch):\n    {line}\n")
        assert len(offenders([f])) == 1
    finally:
        f.unlink()
    # what is not a state root's layout passes: a dataset's own files, a checkpoint folder
    ok = tmp_path / "ok.py"
    ok.write_text('m = f"{root}/meta/info.json"\nc = f"{checkpoint_root}/{folder}"\nt = root / "train"\n')
    assert offenders([ok]) == []


@pytest.mark.parametrize("root", ["s3://bucket/prefix", "/srv/state"])
def test_the_layout(root):
    s = StateRoot(StorageLocation(root))
    assert s == StateRoot(s) and s.root == root
    assert s.catalog == f"{root}/catalog/episodes"
    assert s.acceptance == f"{root}/catalog/site_acceptance"
    assert s.manifests == f"{root}/manifests"
    assert s.manifest_ref("spec-a") == f"{root}/manifests/refs/spec-a.json"
    assert s.landing == f"{root}/landing"
    assert s.table("raw_episodes") == f"{root}/ingest/raw_episodes"
    assert s.batch_manifest("b1") == f"{root}/ingest/batches/b1.json"
    assert s.manual_cursor == f"{root}/ingest/manual_cursor.json"
    assert s.container("b1", "ep-1") == f"{root}/containers/b1/ep-1.rdep"
    for bad in (lambda: s.manifest_ref("../x"), lambda: s.container("b1", "a/b"), lambda: s.batch_manifest("")):
        with pytest.raises(UnsafeNameError):
            bad()


def test_a_relative_root_is_resolved_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert StateRoot("st").catalog == f"{tmp_path}/st/catalog/episodes"
