"""Attaching images in the chat page: at most three, images only, sent with the message."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    connected,
    find,
    finished,
    last_exchange,
    login,
    say,
    until,
    wait_text,
)
from tests.integration.harness import ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]


def png(rgb: tuple[int, int, int], size: int = 48) -> bytes:
    """A square PNG of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\0" + bytes(rgb) * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def attached(driver: WebDriver, count: int) -> None:
    """`count` attachments listed, every upload finished."""
    css = "#attachments li"
    until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, css)) == count
          and all(li.get_attribute("data-state") != "uploading"
                  for li in d.find_elements(By.CSS_SELECTOR, css)), f"{count} attachment(s)")


def test_images_are_attached_checked_and_sent_with_the_message(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, tmp_path: Path, shot: Shot
) -> None:
    """One image, then three more (one too many: refused with a reason), one removed, a text
    file refused; the message goes with two images, shown in it and sent to the model."""
    colours = {"teal": (0, 128, 128), "coral": (255, 127, 80), "gold": (255, 215, 0),
               "plum": (142, 69, 133)}
    files = {}
    for name, rgb in colours.items():
        files[name] = tmp_path / f"{name}.png"
        files[name].write_bytes(png(rgb))
    note = tmp_path / "note.txt"
    note.write_text("not an image")
    llm.queue(completion("Two squares: teal and gold."))
    login(browser, server)
    connected(browser)
    picker = find(browser, "input#attach")
    picker.send_keys(str(files["teal"]))
    attached(browser, 1)
    picker.send_keys("\n".join(str(files[n]) for n in ("coral", "gold", "plum")))
    attached(browser, 3)
    assert "at most 3" in wait_text(browser, "#attach-error", "plum.png").text
    shot(browser, "three-attached")

    find(browser, "#attachments li:nth-child(2) button.remove").click()
    attached(browser, 2)
    picker.send_keys(str(note))
    wait_text(browser, "#attach-error", "note.txt")
    attached(browser, 2)
    shot(browser, "text-file-refused")

    say(browser, "What is in these pictures?")
    finished(browser)
    turn = last_exchange(browser)
    thumbs = turn.find_elements(By.CSS_SELECTOR, ".msg.user img")
    assert len(thumbs) == 2
    until(browser, lambda d: all(d.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 0", img)
        for img in thumbs), "the sent images to load")
    parts = llm.requests[0]["messages"][-1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert urls == ["data:image/png;base64," + base64.b64encode(png(colours[n])).decode()
                    for n in ("teal", "gold")]
    assert find(browser, '.answer[data-state="final"]').text == "Two squares: teal and gold."
    assert browser.find_elements(By.CSS_SELECTOR, "#attachments li") == []
    shot(browser, "sent")
