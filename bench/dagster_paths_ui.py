"""The UI use path of bench.dagster_paths: `dagster-webserver -w workspace.yaml` on the bench's
instance, pages opened in headless Chromium (robodata_testing.browser), each counted when it shows
what it should and no error banner.

asset graph       /asset-groups: every group's box
partitions        /assets/episodes?view=partitions: the batch partitions, all materialized
asset checks      /assets/episodes?view=checks&checkDetail=converted, execution history: the failed
                  evaluation of the CLI batch with the quarantined episode and its reason
sensors           the landing-zone sensor's page: running, with the tick that requested a run
batch_preview     /assets/qc_results?view=partitions&partition=cli-1: that batch's materialization (its
                  quarantined episode's reason: not the latest batch's), its preview metadata opened
                  ([Show Markdown]): image elements (thumbnail strips, the joint-state plot) the
                  browser decoded
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

from robodata_testing.browser import BrowserError, HeadlessChromium
from robodata_testing.procs import stop
from robodata_testing.services import free_port

# what the UI shows instead of a page when something is wrong
ERROR_BANNERS = (
    "Unexpected GraphQL error",
    "Something went wrong",
    "An error occurred",
    "PythonError",
    "Could not find",
    "No assets were found",
    "Error loading",
)
HISTORY_TAB = (
    "(() => { const b = [...document.querySelectorAll('button')]"
    ".filter(e => e.innerText.trim() === 'Execution history'); if (b.length) b[0].click(); return b.length; })()"
)
# open every markdown metadata entry (the innermost element showing the link), then count the images
# the dialogs show that the browser decoded (naturalWidth > 0): a data: URI it could not decode counts 0
SHOW_MARKDOWN = (
    "(() => { const t = '[Show Markdown]'; const b = [...document.querySelectorAll('a,button')]"
    ".filter(e => e.innerText && e.innerText.trim() === t); b.forEach(e => e.click()); return b.length; })()"
)
DECODED_IMAGES = "[...document.querySelectorAll('img[src^=\"data:image/\"]')].filter(i => i.naturalWidth > 0).length"


def start_webserver(u: Any) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = u.spawn("dagster-webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port), log="web.log")
    return proc, f"http://127.0.0.1:{port}"


def _wait_up(base: str, proc: subprocess.Popen, timeout_s: float = 180) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/server_info", timeout=5):
                return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    return False


def pages(n_batches: int) -> list[tuple[str, str, list[str], str]]:
    """(name, path, text the page must show, what to do then: "" / "history" / "images")."""
    return [
        ("asset_graph", "/asset-groups", ["Global asset lineage", "ingest", "curation", "train", "layout"], ""),
        (
            "partitions",
            "/assets/episodes?view=partitions",
            ["cli-1", f"Materialized ({n_batches})", "Failed (0)"],
            "",
        ),
        (
            "asset_checks",
            "/assets/episodes?view=checks&checkDetail=converted",
            ["Failed", "site-broken", "not a decodable JPEG"],
            "history",
        ),
        (
            "sensors",
            "/locations/robodata/sensors/landing_zone_live_sensor",
            ["landing_zone_live_sensor", "Running", "1 run requested"],
            "",
        ),
        (
            "batch_preview",
            "/assets/qc_results?view=partitions&partition=cli-1",
            ["preview", "[Show Markdown]", "site-broken"],
            "images",
        ),
    ]


def _wait_images(page: HeadlessChromium, timeout_s: float = 30) -> int:
    """Open the markdown metadata and wait for a decoded image; returns how many there are."""
    page.call("Runtime.evaluate", expression=SHOW_MARKDOWN, returnByValue=True)
    deadline = time.monotonic() + timeout_s
    while True:
        n = page.call("Runtime.evaluate", expression=DECODED_IMAGES, returnByValue=True)["result"].get("value", 0)
        if n or time.monotonic() > deadline:
            return int(n)
        time.sleep(0.5)


def ui_pages(u: Any, web: tuple[subprocess.Popen, str] | None = None, n_batches: int = 3) -> dict[str, Any]:
    """Open each page; returns ui_pages_ok and, for a page that failed, what it showed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    proc, base = web or start_webserver(u)
    failed: dict[str, str] = {}
    ok = 0
    try:
        if not browser or not _wait_up(base, proc):
            return {
                "ui_pages_ok": 0,
                "ui_errors": "no chromium" if not browser else (u.tmp / "web.log").read_text()[-2000:],
            }
        with HeadlessChromium.start(browser, width=1600, height=1000) as page:
            for name, path, needles, then in pages(n_batches):
                try:
                    page.goto(base + path)
                    if then == "history":
                        page.wait_for_text(["Execution history"], timeout_s=60, absent=("Loading...",))
                        page.call("Runtime.evaluate", expression=HISTORY_TAB, returnByValue=True)
                    page.wait_for_text(needles, timeout_s=60, absent=ERROR_BANNERS)
                    if then == "images" and not _wait_images(page):
                        raise BrowserError(f"no decoded preview image on {path}")
                    ok += 1
                except BrowserError as exc:
                    failed[name] = str(exc)[:600]
    finally:
        stop(proc)
    return {"ui_pages_ok": ok, "ui_errors": failed}
