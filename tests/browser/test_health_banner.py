"""The banner both pages show while something is wrong (read from /health): the cause in one
line with a link to the setting, gone by itself once the cause is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Servers,
    api,
    connected,
    hidden,
    login,
    path_of,
    phone,
    until,
    visible,
)
from tests.integration.harness import StubLlm

Shot = Callable[[WebDriver, str], Path]
CLOSED = "http://127.0.0.1:9/v1"


def test_an_unreachable_model_is_a_banner_until_it_answers(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot
) -> None:
    """On /brain: the model cannot be reached, says the banner, with a link to the models'
    settings (it opens [llm]'s form); once the address is fixed, the banner goes by itself."""
    server = serve(llm={"base_url": CLOSED})
    login(browser, server, "/brain")
    line = visible(browser, "#health-banner li[data-cause='model-primary-light']")
    assert line.text.startswith("The model (every job) cannot be reached: ")
    assert "Set llm.base_url to its address" in line.text
    shot(browser, "banner")
    phone(browser)
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the banner scrolls sideways at phone size: {widths}"
    shot(browser, "banner-phone")

    line.find_element(By.LINK_TEXT, "Change the model").click()
    until(browser, lambda d: d.current_url.endswith("/brain#settings-models"), "the anchor")
    until(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "llm-preset"
          or d.switch_to.active_element.tag_name == "summary", "focus in the models' settings")
    visible(browser, "#llm-base-url")

    with api(server) as client:
        assert client.patch("/api/settings", json={"llm.base_url": llm.base_url}).status_code == 200
    hidden(browser, "#health-banner")
    shot(browser, "banner-gone")


def test_an_embedder_standing_in_is_a_banner_on_the_chat_page(
    browser: WebDriver, serve: Servers, tmp_path: Path, shot: Shot
) -> None:
    """memory.embedder "minilm" with weights that cannot load: hashed words stand in, and the
    chat page's banner says so, with a link to the embedder's setting at /brain."""
    broken = tmp_path / "mine" / "encoder.onnx"
    broken.parent.mkdir()
    broken.write_bytes(b"not an onnx graph")
    (broken.parent / "tokenizer.json").write_text("{}")
    server = serve(memory={"embedder": "minilm", "embed_model_path": str(broken)})
    login(browser, server)
    connected(browser)
    line = visible(browser, "#health-banner li[data-cause='embedder']")
    assert line.text.startswith("Memory uses the hashed embedder instead of minilm: ")
    assert str(broken) in line.text
    visible(browser, "#input")
    hidden(browser, "#setup")
    shot(browser, "embedder-banner")

    line.find_element(By.LINK_TEXT, "Change the embedder").click()
    until(browser, lambda d: path_of(d) == "/brain", "the brain page")
    until(browser, lambda d: d.switch_to.active_element.get_attribute("id")
          == "setting-memory-embedder-input", "the embedder's field focused")
    assert visible(browser, "#health-banner li[data-cause='embedder']")
    shot(browser, "embedder-setting")
