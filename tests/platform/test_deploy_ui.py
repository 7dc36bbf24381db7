"""The UI: `dagster dev -w workspace.yaml` opened in headless Debian Chromium.

Checks that the asset graph shows every asset, each group's page its assets, and each asset's
checks tab its checks (names taken from the webserver's GraphQL API, so the test follows the
definitions); saves the global asset graph as a PNG in a temporary folder, or where
ROBODATA_UI_SCREENSHOT says (`ROBODATA_UI_SCREENSHOT=docs/ui-asset-graph.png` refreshes the one
README shows; a test run never writes into the checkout by itself).
"""

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from robodata_testing import procs
from robodata_testing.browser import HeadlessChromium
from robodata_testing.services import free_port
from tests.platform.deploy_support import chromium

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = Path(
    os.environ.get("ROBODATA_UI_SCREENSHOT") or Path(tempfile.mkdtemp(prefix="robodata-ui-")) / "ui-asset-graph.png"
)
ASSETS_QUERY = """{ assetNodes { assetKey { path } groupName isExecutable
  assetChecksOrError { ... on AssetChecks { checks { name } } } } }"""


def _graphql(base, query):
    req = urllib.request.Request(
        f"{base}/graphql", data=json.dumps({"query": query}).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["data"]


@pytest.fixture(scope="module")
def webserver():
    browser = chromium()  # skip/fail early, before paying for dagster dev
    home = Path(tempfile.mkdtemp(prefix="robodata-ui-home-"))
    # the local instance, without the first-visit newsletter dialog over the graph
    local = (ROOT / "deploy" / "dagster.local.yaml").read_text()
    (home / "dagster.yaml").write_text(local + "\nnux:\n  enabled: false\n")
    port = free_port()
    env = dict(
        os.environ,
        DAGSTER_HOME=str(home),
        DAGSTER_DISABLE_TELEMETRY="1",
        ROBODATA_DEPLOYMENT="local",
    )
    exe = Path(sys.executable).parent / "dagster"
    # its own process group under a watchdog: dagster dev, its webserver, daemon and code server go
    # with it, also when this test process is killed at a timeout (robodata_testing.procs)
    argv = [str(exe), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)]
    proc = procs.spawn(argv, log=home / "dev.log", env=env, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 150
        nodes = None
        while time.monotonic() < deadline and nodes is None:
            assert proc.poll() is None, (home / "dev.log").read_text()[-3000:]
            try:
                nodes = _graphql(base, ASSETS_QUERY).get("assetNodes") or None
            except (urllib.error.URLError, ConnectionError, KeyError, TypeError):
                time.sleep(1)
        assert nodes, "dagster dev did not serve the code location: " + (home / "dev.log").read_text()[-3000:]
        yield base, nodes, browser
    finally:
        procs.stop(proc)
        assert procs.leftovers(f"DAGSTER_HOME={home}") == []
        shutil.rmtree(home, ignore_errors=True)


def test_asset_graph_groups_and_checks_in_chromium(webserver):
    base, nodes, browser = webserver
    # defined assets (not stubs for keys other code locations or later work will define)
    assets = {"/".join(n["assetKey"]["path"]): n for n in nodes if n["isExecutable"]}
    groups = sorted({n["groupName"] for n in assets.values()})
    checks = {k: [c["name"] for c in n["assetChecksOrError"].get("checks", [])] for k, n in assets.items()}
    assert "ingest" in groups
    # a large viewport so the whole graph fits, scaled down for the README
    with HeadlessChromium.start(browser, width=2400, height=1600) as page:
        page.goto(f"{base}/asset-groups")  # global lineage: one box per group (collapsed when several)
        named = [g for g in groups if g != "default"]  # ungrouped assets get no labelled box
        page.wait_for_text(
            ["Global asset lineage", *named], timeout_s=90, absent=("Loading...", "Join the Dagster community")
        )
        # expand every group box (the UI remembers it), then reload so the layout fits the expanded graph
        page.click_all('[aria-label="unfold_more"]')
        page.goto(f"{base}/asset-groups")
        # (at fit-to-screen zoom a large graph may draw nodes without text; assets are checked per group below)
        page.wait_for_text([*named, "Asset checks"], timeout_s=60, absent=("Loading...",))
        time.sleep(1)  # let the zoom-to-fit animation finish
        page.screenshot(SCREENSHOT, scale=0.66)
        for group in groups:
            members = [k.split("/")[-1] for k, n in assets.items() if n["groupName"] == group]
            page.goto(f"{base}/locations/robodata/asset-groups/{group}")
            page.wait_for_text([group, *members, "Asset checks"], timeout_s=60, absent=("Loading...",))
        for key, names in checks.items():
            if names:
                page.goto(f"{base}/assets/{key}?view=checks")
                page.wait_for_text(names, timeout_s=60)
    png = SCREENSHOT.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a real rendered page, not a blank
