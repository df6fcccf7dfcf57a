"""A headless Chromium driven over the DevTools protocol, for tests/tools/test_site.py.

Only the system's ``chromium`` (Debian's package) and ``websocket-client`` are needed: no browser
is downloaded and no driver binary has to match the browser's version. The protocol is a JSON
message per command over one websocket; the five commands used here are ``Page.enable``,
``Page.navigate`` (then wait for the ``Page.loadEventFired`` event), ``Runtime.evaluate``,
``Page.getLayoutMetrics`` and ``Page.captureScreenshot``.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
INSTALL_HINT = "install Debian's browser (sudo apt-get install chromium) or put one of chromium/chrome on PATH"


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Chromium:
    """``with Chromium() as browser: browser.open(url); browser.evaluate("document.title")``."""

    def __init__(self, executable: str | None = None, width: int = 1280, height: int = 900, timeout: float = 30.0):
        self.executable = executable or find_browser()
        if self.executable is None:
            raise RuntimeError(f"no headless browser found: {INSTALL_HINT}")
        self.size, self.timeout, self._next_id = (width, height), timeout, 0

    def __enter__(self) -> Chromium:
        import websocket  # websocket-client, pinned in requirements.txt

        self._profile = tempfile.TemporaryDirectory(prefix="tagnn-chromium-")
        self._process = subprocess.Popen(
            [
                self.executable,
                "--headless=new",
                "--no-sandbox",  # tests run as root in containers
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--remote-debugging-port=0",  # the browser picks a free port and writes it down
                f"--user-data-dir={self._profile.name}",
                f"--window-size={self.size[0]},{self.size[1]}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self._process.poll() is not None:
                self.__exit__(None, None, None)
                raise RuntimeError(f"{self.executable} did not start its DevTools server")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout) as reply:
            page = next(t for t in json.load(reply) if t["type"] == "page")
        self._socket = websocket.create_connection(
            page["webSocketDebuggerUrl"],
            timeout=self.timeout,
            suppress_origin=True,  # Chromium rejects foreign origins
        )
        self.send("Page.enable")
        self.send("Runtime.enable")
        return self

    def __exit__(self, *exc) -> None:
        if getattr(self, "_socket", None) is not None:
            self._socket.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._profile.cleanup()

    # -- the protocol ------------------------------------------------------------------------
    def send(self, method: str, wait_for: str | None = None, **params) -> dict:
        """Send one command; return its result (or, with ``wait_for``, once that event arrived)."""
        self._next_id += 1
        self._socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        result, event_seen = None, wait_for is None
        deadline = time.monotonic() + self.timeout
        while result is None or not event_seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{method}: no answer{' or ' + wait_for if wait_for else ''} in {self.timeout} s")
            message = json.loads(self._socket.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result = message["result"]
            elif wait_for is not None and message.get("method") == wait_for:
                event_seen = True
        return result

    def open(self, url: str) -> None:
        """Load ``url`` and return after its load event (scripts run, images fetched)."""
        answer = self.send("Page.navigate", wait_for="Page.loadEventFired", url=url)
        if answer.get("errorText"):
            raise RuntimeError(f"{url}: {answer['errorText']}")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable values only)."""
        answer = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in answer:
            raise RuntimeError(f"javascript failed: {answer['exceptionDetails'].get('text')}: {expression[:80]}")
        return answer["result"].get("value")

    def screenshot(self, path: Path, max_height: int = 16000) -> Path:
        """A PNG of the whole page (up to ``max_height`` CSS pixels tall)."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height), "scale": 1}
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
