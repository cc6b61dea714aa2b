"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

Chromium reads NUL-terminated JSON commands from fd 3 and writes replies and events to fd 4, so
no websocket library and no browser download is needed: Debian's ``chromium`` package is enough.
``Page.open`` loads a file and records console messages, uncaught exceptions, log entries and
every network request made while loading.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

BINARIES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, binary: str, profile: Path, timeout: float = 60.0, stderr=subprocess.DEVNULL):
        self.timeout = timeout
        cmd_r, self._cmd_w = os.pipe()  # we write commands; chromium reads them on fd 3
        self._res_r, res_w = os.pipe()  # chromium writes replies on fd 4; we read them
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--mute-audio", f"--user-data-dir={profile}",
                "about:blank"]

        def child_fds() -> None:  # in the child, before exec: the pipe ends become fds 3 and 4
            r, w = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 5), fcntl.fcntl(res_w, fcntl.F_DUPFD, 5)  # clear of 3 and 4
            os.dup2(r, 3)
            os.dup2(w, 4)

        # close_fds=False: Python's own descriptors are not inheritable (PEP 446); only 3 and 4 pass
        self.proc = subprocess.Popen([binary, *args], preexec_fn=child_fds, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=stderr)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._res_r)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -------------------------------------------------------------- protocol
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str | None = None) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            e = self._read_message(deadline)
            if e.get("method") == method and e.get("sessionId") == session:
                return e
            self.events.append(e)

    def open(self, path: Path, width: int = 1400, height: int = 1000) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=session)
        self.wait_for("Page.loadEventFired", session)
        self.evaluate("1", session)  # flush events queued before the load event
        return Page(self, session)

    def evaluate(self, expression: str, session: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def _events(self, method: str) -> list[dict]:
        return [e["params"] for e in self.browser.events if e.get("method") == method
                and e.get("sessionId") == self.session]

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries (CSP violations, failed loads)."""
        out = [" ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
               for p in self._events("Runtime.consoleAPICalled") if p["type"] in ("error", "assert")]
        out += [p["exceptionDetails"].get("text", "exception") for p in self._events("Runtime.exceptionThrown")]
        out += [p["entry"]["text"] for p in self._events("Log.entryAdded") if p["entry"]["level"] == "error"]
        return out

    def requests(self) -> list[str]:
        return [p["request"]["url"] for p in self._events("Network.requestWillBeSent")]

    def evaluate(self, expression: str):
        return self.browser.evaluate(expression, self.session)

    def screenshot(self, path: Path, max_height: int = 12000) -> bytes:
        metrics = self.browser.send("Page.getLayoutMetrics", session=self.session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        width, height = int(size["width"]), min(int(size["height"]), max_height)
        shot = self.browser.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}, session=self.session)
        data = base64.b64decode(shot["data"])
        Path(path).write_bytes(data)
        return data
