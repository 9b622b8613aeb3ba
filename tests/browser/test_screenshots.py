"""scripts/screenshots makes the documentation's images from the real pages: asked for the chat
in light at both sizes, it writes exactly those two PNGs, each a whole image at its size."""

from __future__ import annotations

import importlib.util
import struct
import sys
import zlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.browser.conftest import CHROMEDRIVER, CHROMIUM, ROOT, SKIP_LINE

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG colour type -> samples per pixel


def script() -> ModuleType:
    """scripts/screenshots.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" /
                                                  "screenshots.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def decoded(path: Path) -> tuple[int, int, bytes]:
    """A PNG's width, height and filtered scanlines, every chunk's CRC checked."""
    data = path.read_bytes()
    assert data.startswith(SIGNATURE), f"{path.name} is not a PNG"
    at, chunks = len(SIGNATURE), []
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + body), f"{path.name}: bad CRC in {kind!r}"
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR"
    assert chunks[-1][0] == b"IEND"
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    assert depth == 8, f"{path.name}: {depth} bits a sample"
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(pixels) == height * (1 + width * CHANNELS[colour])  # a filter byte a line
    return width, height, pixels


def test_the_chat_in_light_is_written_at_desktop_and_phone_size(tmp_path: Path) -> None:
    """`--only chat --theme light` writes chat-light-desktop.png (1280x800) and
    chat-light-phone.png (390x844) and nothing else; both decode whole and are not blank."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(SKIP_LINE)
    shots = script()
    assert shots.main(["--out", str(tmp_path), "--only", "chat", "--theme", "light"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "chat-light-desktop.png", "chat-light-phone.png"]
    for name, size in [("chat-light-desktop.png", (1280, 800)),
                       ("chat-light-phone.png", (390, 844))]:
        width, height, pixels = decoded(tmp_path / name)
        assert (width, height) == size, name
        assert len(set(pixels)) > 16, f"{name} is blank"
