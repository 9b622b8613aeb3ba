"""An image the person attached, as the store keeps it and a model request carries it."""

from __future__ import annotations

import msgspec


class Image(msgspec.Struct, frozen=True):
    """An image the person attached: its bytes and MIME type (image/png, jpeg, webp, gif)."""

    media_type: str
    data: bytes
