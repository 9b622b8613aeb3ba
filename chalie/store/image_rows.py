"""The images table: what POST /api/images stored, and what a turn sends to its model."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from chalie.values.images import Image

# What an image's first bytes say it is. WebP is RIFF....WEBP; GIF is GIF87a or GIF89a.
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
)


def sniff(data: bytes) -> str | None:
    """The media type of `data` from its first bytes, or None when it is none of PNG, JPEG,
    WebP and GIF (what the client says the type is does not count)."""
    for magic, offset, media_type in _MAGIC:
        if data[offset:offset + len(magic)] == magic:
            return media_type
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def insert(conn: apsw.Connection, image_id: str, media_type: str, data: bytes,
           now: float) -> None:
    conn.execute("INSERT INTO images (id, media_type, size, data, created_at) "
                 "VALUES (?, ?, ?, ?, ?)", (image_id, media_type, len(data), data, now))


def load(conn: apsw.Connection, ids: Sequence[str]) -> tuple[tuple[Image, ...], list[str]]:
    """The images `ids` name, in that order, and the ids no image has."""
    found: dict[str, Image] = {}
    for image_id, media_type, data in conn.execute(
        f"SELECT id, media_type, data FROM images WHERE id IN ({','.join('?' * len(ids))})",
        tuple(ids),
    ):
        found[image_id] = Image(media_type, bytes(data))
    missing = [i for i in ids if i not in found]
    return tuple(found[i] for i in ids if i in found), missing
