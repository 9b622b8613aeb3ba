"""What every page owes every person: a name for each control (as Chromium's accessibility
tree computes it, the one a screen reader reads), colours that follow the system's light or
dark setting, and a layout that fits a phone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import Servers, connected, find, login, phone, visible

Shot = Callable[[WebDriver, str], Path]
CONTROLS = {"button", "textbox", "searchbox", "link", "checkbox", "radio", "combobox",
            "listbox", "slider", "spinbutton", "switch", "tab", "menuitem"}


def nameless_controls(driver: WebDriver) -> list[str]:
    """Controls a screen reader would announce without a name."""
    tree: dict[str, Any] = driver.execute_cdp_cmd("Accessibility.getFullAXTree", {})
    out = []
    for node in tree["nodes"]:
        role = (node.get("role") or {}).get("value")
        if node.get("ignored") or role not in CONTROLS:
            continue
        if not str((node.get("name") or {}).get("value") or "").strip():
            out.append(f"{role} (backend node {node.get('backendDOMNodeId')})")
    return out


def background(driver: WebDriver) -> list[int]:
    colour = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    return [int(float(x)) for x in str(colour)[colour.index("(") + 1:-1].split(",")[:3]]


def luminance(rgb: list[int]) -> float:
    r, g, b = rgb
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("page", ["/", "/brain", "setup"], ids=["chat", "brain", "setup-card"])
def test_every_control_is_named_dark_follows_the_system_and_a_phone_fits(
    browser: WebDriver, serve: Servers, shot: Shot, page: str
) -> None:
    """Also the chat page's setup card (a server whose model cannot be reached) and the
    dashboard's settings, with its banner."""
    server = serve(llm={"base_url": "http://127.0.0.1:9/v1"}) if page == "setup" else serve()
    login(browser, server, "/" if page == "setup" else page)
    if page == "/":
        connected(browser)
        visible(browser, "#input")
    elif page == "setup":
        visible(browser, "#llm-preset")
        visible(browser, "#health-banner")
    else:
        visible(browser, "#pairing-generate")
        find(browser, "#memory")
        find(browser, "#setting-memory-embedder-input")
    assert browser.execute_script("return document.documentElement.lang")
    assert browser.title.strip()
    assert nameless_controls(browser) == []
    light = background(browser)
    shot(browser, "light")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        dark = background(browser)
        shot(browser, "dark")
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert luminance(dark) < luminance(light) - 100, (light, dark)

    phone(browser)
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways at phone size: {widths}"
    shot(browser, "phone")
