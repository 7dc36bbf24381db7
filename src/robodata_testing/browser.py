"""Headless Debian Chromium driven over the DevTools protocol (CDP), for UI tests and screenshots.

    with HeadlessChromium.start("/usr/bin/chromium") as page:
        page.goto("http://127.0.0.1:3000/asset-groups")
        page.wait_for_text(["ingest"], timeout_s=60)
        page.screenshot("docs/ui-asset-graph.png")

A fresh --user-data-dir per start, loopback-only debugging port, and every background
network feature off (the machine has no outside network).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

from robodata.errors import RobodataError
from robodata_testing import procs

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
)


class BrowserError(RobodataError):
    pass


class HeadlessChromium:
    def __init__(self, proc: subprocess.Popen, profile: Path, ws: websocket.WebSocket):
        self._proc, self._profile, self._ws, self._id = proc, profile, ws, 0

    @classmethod
    def start(cls, executable: str, width: int = 1600, height: int = 1000, timeout_s: float = 60) -> HeadlessChromium:
        profile = Path(tempfile.mkdtemp(prefix="robodata-chromium-"))
        argv = [
            executable,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        proc = procs.spawn(argv, grace_s=5.0)  # its own group: never outlives the test (robodata_testing.procs)
        try:
            port = cls._devtools_port(proc, profile / "DevToolsActivePort", timeout_s)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.load(r)
            url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
            ws = websocket.create_connection(url, suppress_origin=True, timeout=timeout_s)
        except BaseException:
            procs.stop(proc, grace_s=5.0)
            shutil.rmtree(profile, ignore_errors=True)
            raise
        page = cls(proc, profile, ws)
        page.call("Page.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        return page

    @staticmethod
    def _devtools_port(proc: subprocess.Popen, port_file: Path, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BrowserError(f"chromium exited with {proc.returncode} before opening DevTools")
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text:
                return int(text.split()[0])
            time.sleep(0.1)
        raise BrowserError(f"chromium did not open DevTools within {timeout_s}s")

    def call(self, method: str, **params: object) -> dict:
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def text(self) -> str:
        res = self.call(
            "Runtime.evaluate", expression="document.body ? document.body.innerText : ''", returnByValue=True
        )
        return str(res.get("result", {}).get("value", ""))

    def wait_for_text(self, needles: list[str], timeout_s: float = 60, absent: tuple[str, ...] = ()) -> str:
        """Poll the page text until every needle is present and no `absent` string is; returns the text."""
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(n in text for n in needles) and not any(a in text for a in absent):
                return text
            time.sleep(0.5)
        missing = [n for n in needles if n not in text]
        raise BrowserError(f"page never showed {missing} (or still showed {list(absent)}); text was: {text[:1500]!r}")

    def click_all(self, selector: str, max_clicks: int = 50, settle_s: float = 1.0) -> int:
        """Click the first element matching `selector` until none is left (each click may re-render)."""
        js = (
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return false;"
            " e.dispatchEvent(new MouseEvent('click', {bubbles: true})); return true; })()"
        )
        n = 0
        while n < max_clicks and self.call("Runtime.evaluate", expression=js, returnByValue=True)["result"].get(
            "value"
        ):
            n += 1
            time.sleep(settle_s)
        return n

    def screenshot(self, path: str | os.PathLike[str], scale: float = 1.0) -> Path:
        params: dict = {"format": "png"}
        if scale != 1.0:
            m = self.call("Page.getLayoutMetrics")["cssVisualViewport"]
            params["clip"] = {"x": 0, "y": 0, "width": m["clientWidth"], "height": m["clientHeight"], "scale": scale}
        data = base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        return out

    def close(self) -> None:
        try:
            self._ws.close()
        finally:
            procs.stop(self._proc, grace_s=5.0)
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
