"""POST /api/images: an image for a later `chat` frame's `image_ids`.

The body is the image's bytes (any Content-Type; a browser's `fetch(url, {body: file})`), or a
multipart/form-data form whose one file is the image. What the image is comes from its first
bytes: PNG, JPEG, WebP or GIF, else 400; larger than images.max_bytes, 413 (refused from the
Content-Length before the body is read, where the client sent one). Answers 201
{"image_id", "media_type", "size"}.
"""

from __future__ import annotations

import uuid
from typing import Literal, cast, get_args

import msgspec

from chalie.edge.api_spec import COOKIE_AUTH, Operation, Raw, path_id
from chalie.edge.frames import MAX_IMAGE_ID
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.rest_schedules import apply
from chalie.store.background_ops import InsertImage
from chalie.store.image_rows import load, sniff

MediaType = Literal["image/png", "image/jpeg", "image/webp", "image/gif"]
_BYTES = {"type": "string", "format": "binary"}


class StoredImage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    image_id: str  # for a `chat` frame's `image_ids`
    media_type: MediaType
    size: int  # bytes


class ImagesHandler(AuthedHandler):
    api = {"post": Operation(
        "Upload an image for a later chat frame's image_ids", {201: StoredImage},
        auth=(COOKIE_AUTH,), body=Raw({
            "application/octet-stream": _BYTES,
            "multipart/form-data": {"type": "object", "properties": {"image": _BYTES}},
        }, "the image's bytes (PNG, JPEG, WebP or GIF), or a form whose one file is the image"),
        description="What the image is comes from its first bytes; larger than "
                    "images.max_bytes is a 413.")}

    def body_limit(self) -> tuple[int, str]:
        return self.ctx.config.images.max_bytes + _FORM_SLACK, "images.max_bytes"

    async def prepare(self) -> None:
        await super().prepare()
        limit = self.ctx.config.images.max_bytes
        declared = self.request.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > limit + _FORM_SLACK:
            raise ApiError(413, f"the image is {int(declared)} bytes; images.max_bytes allows "
                                f"{limit}")

    async def post(self) -> None:
        self.query_params()
        data = self._image_bytes()
        limit = self.ctx.config.images.max_bytes
        if not data:
            raise ApiError(400, "the body is empty: send the image's bytes (PNG, JPEG, WebP or "
                                "GIF)")
        if len(data) > limit:
            raise ApiError(413, f"the image is {len(data)} bytes; images.max_bytes allows "
                                f"{limit}")
        media_type = sniff(data)
        if media_type is None:
            raise ApiError(400, f"not a PNG, JPEG, WebP or GIF image (it begins {data[:8]!r})")
        image_id = uuid.uuid4().hex
        await apply(self, InsertImage(image_id, media_type, data))
        self.set_status(201)
        self.write_json(StoredImage(image_id, cast(MediaType, media_type), len(data)))

    def _image_bytes(self) -> bytes:
        files = self.request.files
        if not files:
            return self.request.body
        parts = [f for group in files.values() for f in group]
        if len(parts) != 1:
            raise ApiError(400, f"the form holds {len(parts)} files; send one image a request")
        return parts[0].body


_FORM_SLACK = 64 * 1024  # a multipart form's boundaries and headers around the image


class ImageHandler(AuthedHandler):
    """GET /api/images/<id>: an uploaded image's bytes, as its sniffed type (the chat page shows
    the person's images again after a reload). Served with a policy that runs nothing."""

    api = {"get": Operation(
        "An uploaded image's bytes, as its type", {200: Raw(
            dict.fromkeys(get_args(MediaType), _BYTES), "the image")},
        auth=(COOKIE_AUTH,), errors=(404,),
        path=(path_id("image_id", "the image's id", max_chars=MAX_IMAGE_ID),))}

    async def get(self, image_id: str) -> None:
        self.query_params()
        if not 0 < len(image_id) <= MAX_IMAGE_ID:
            raise ApiError(400, f"image_id: 1 to {MAX_IMAGE_ID} characters, "
                                f"got {shown(image_id)}")
        images, _ = await self.off_loop(lambda: load(self.ctx.read(), [image_id]))
        if not images:
            raise ApiError(404, f"no image {shown(image_id)}")
        self.set_header("Content-Type", images[0].media_type)
        self.set_header("Content-Security-Policy", "default-src 'none'; sandbox")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "private, max-age=86400, immutable")
        self.finish(images[0].data)
