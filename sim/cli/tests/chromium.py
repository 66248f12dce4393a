"""A headless Chromium driven over its DevTools protocol on a pipe (--remote-debugging-pipe:
commands on fd 3, replies on fd 4, each a JSON text ended by a NUL byte), with nothing beyond the
standard library and the browser Debian packages."""

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class ChromiumError(RuntimeError):
    pass


class Chromium:
    def __init__(self, binary, width=1100, height=900):
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="allocsim-chromium-")

        def child_fds():
            os.dup2(commands_read, 3)
            os.dup2(replies_write, 4)

        self._process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=child_fds,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.console = []  # console messages and exceptions of the page
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget",
                                   {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def close(self):
        self._process.kill()
        self._process.wait()
        os.close(self._commands)
        os.close(self._replies)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, params=None, session=None, timeout=30):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                    raise ChromiumError(f"{method}: no reply in {timeout} s")
                chunk = os.read(self._replies, 1 << 16)
                if not chunk:
                    raise ChromiumError(f"{method}: the browser closed its pipe")
                self._buffer += chunk
            text, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(text)
            if reply.get("method") == "Runtime.consoleAPICalled":
                args = reply["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
            elif reply.get("method") == "Runtime.exceptionThrown":
                self.console.append("exception: " + json.dumps(reply["params"]["exceptionDetails"])[:500])
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def call(self, method, params=None, timeout=30):
        return self._call(method, params, self._session, timeout)

    def open(self, path):
        self.call("Page.navigate", {"url": "file://" + os.path.abspath(path)})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate",
                           {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, timeout=20):
        """Polls until `expression` is truthy; the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            try:
                if self.evaluate(expression):
                    return time.monotonic() - start
            except ChromiumError:
                pass
            time.sleep(0.02)
        raise ChromiumError(f"timed out waiting for {expression}")

    def mouse(self, kind, x, y, button="none", clicks=0, **extra):
        self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": button,
                                               "clickCount": clicks, **extra})

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, "left", 1)
        self.mouse("mouseReleased", x, y, "left", 1)

    def drag(self, x0, y, x1, steps=8):
        self.mouse("mouseMoved", x0, y)
        self.mouse("mousePressed", x0, y, "left", 1)
        for i in range(1, steps + 1):
            self.mouse("mouseMoved", x0 + (x1 - x0) * i / steps, y, "left", buttons=1)
        self.mouse("mouseReleased", x1, y, "left", 1)

    def wheel(self, x, y, delta_y):
        self.mouse("mouseWheel", x, y, deltaX=0, deltaY=delta_y)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))
