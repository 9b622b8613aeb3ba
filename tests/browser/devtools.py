"""A DevTools protocol connection of the test's own to the Chromium that chromedriver drives, for
what chromedriver's execute_cdp_cmd cannot do: read events (the service worker registrations
`ServiceWorker.enable` reports) and run code inside a service worker (a session attached to
its target).

It talks to the browser's DevTools WebSocket at the driver's `goog:chromeOptions`
debuggerAddress (127.0.0.1), with flat sessions: every command names the target's session.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import websocket
from selenium.webdriver.remote.webdriver import WebDriver

from tests.integration.harness import WAIT_S


class DevToolsError(AssertionError):
    """A DevTools command failed, or what a test waited for did not come."""


class DevTools:
    """One connection to the browser's DevTools endpoint (close it, or use it in a `with`)."""

    def __init__(self, driver: WebDriver) -> None:
        address = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
        version = httpx.get(f"http://{address}/json/version", timeout=WAIT_S).json()
        # Chromium refuses a DevTools socket whose Origin it was not told to allow: send none.
        self.socket = websocket.create_connection(
            version["webSocketDebuggerUrl"], timeout=WAIT_S, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.socket.close()

    def _read(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.socket.recv())
        if "method" in message:
            self.events.append(message)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        """Run one command (in `session`, else on the browser); its result."""
        number = next(self.ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            answer = self._read()
            if answer.get("id") == number:
                if "error" in answer:
                    raise DevToolsError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result

    def event(self, method: str, match: Callable[[dict[str, Any]], bool] = lambda _: True,
              timeout: float = WAIT_S) -> dict[str, Any]:
        """The params of the first event `method` (seen already or coming) that `match`es."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for message in self.events[seen:]:
                if message["method"] == method and match(message.get("params", {})):
                    params: dict[str, Any] = message.get("params", {})
                    return params
            seen = len(self.events)
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError(f"no {method} event came")
            self.socket.settimeout(left)
            try:
                self._read()
            except websocket.WebSocketTimeoutException:
                continue
            finally:
                self.socket.settimeout(WAIT_S)

    def target(self, match: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """The first target whose info `match`es, once there is one."""
        deadline = time.monotonic() + WAIT_S
        while True:
            for info in self.send("Target.getTargets")["targetInfos"]:
                if match(info):
                    return dict(info)
            if time.monotonic() > deadline:
                raise DevToolsError(f"no target: {what}")
            time.sleep(0.05)

    def attach(self, target_id: str) -> str:
        """A flat session on the target; its id."""
        session: str = self.send("Target.attachToTarget",
                                 {"targetId": target_id, "flatten": True})["sessionId"]
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of `expression` (a promise is awaited) in the session's target."""
        result = self.send("Runtime.evaluate", {
            "expression": expression, "awaitPromise": True, "returnByValue": True}, session)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise DevToolsError(details.get("exception", {}).get("description")
                                or details.get("text", "an exception"))
        return result["result"].get("value")
