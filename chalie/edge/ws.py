"""/ws: the person's chat socket. Decode, validate, hand to the channel's Session; no replies here.

Every answer, error frames for bad input included, comes back from the Session through the
StoreWriter, so it carries the channel's `seq` and is in the event log. A bad frame never closes
the socket.
"""

from __future__ import annotations

import re
from typing import Any

import structlog
import tornado.websocket

from chalie.actors.messages import Deliver, FrameRejected, UserMessage
from chalie.edge.auth import COOKIE
from chalie.edge.context import EdgeContext
from chalie.edge.frames import MAX_IMAGE_IDS, BadFrame, ChatFrame, PongFrame, decode_client_frame

log = structlog.get_logger("chalie.edge")

CHANNEL_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_CLIENT_ID = 128


class ChatSocket(tornado.websocket.WebSocketHandler):
    def initialize(self, ctx: EdgeContext) -> None:
        self.ctx = ctx
        self.channel = "main"

    async def get(self, *args: Any, **kwargs: Any) -> None:
        if not self.ctx.auth.session_ok(self.get_cookie(COOKIE)):
            self.set_status(401)
            self.finish({"error": "not logged in: POST /auth/login first"})
            return
        channel = self.get_query_argument("channel", "main")
        if not CHANNEL_RE.match(channel):
            self.set_status(400)
            self.finish({"error": "channel: 1-64 letters, digits, '_', '.' or '-'"})
            return
        self.channel = channel
        await super().get(*args, **kwargs)

    def open(self, *args: str, **kwargs: str) -> None:
        self.set_nodelay(True)
        self.ctx.hub.register(self.channel, self)
        self.ctx.metrics.ws_connections.inc()
        log.info("ws_open", channel=self.channel)

    def on_close(self) -> None:
        self.ctx.hub.unregister(self.channel, self)
        self.ctx.metrics.ws_connections.dec()
        log.info("ws_closed", channel=self.channel, code=self.close_code)

    def send_frame(self, frame: str) -> None:
        try:
            self.write_message(frame)
        except tornado.websocket.WebSocketClosedError:
            pass  # on_close unregisters it

    def on_message(self, data: str | bytes) -> None:
        received = self.ctx.clock.monotonic()
        if isinstance(data, bytes):
            self._reject("binary frames are not accepted; send JSON text frames")
            return
        limit = self.ctx.config.server.max_frame_bytes
        if len(data) > limit:
            self._reject(f"frame of {len(data)} bytes is over the {limit}-byte limit")
            return
        try:
            frame = decode_client_frame(data)
        except BadFrame as e:
            self._reject(str(e))
            return
        match frame:
            case ChatFrame():
                problem = _check_chat(frame)
                if problem:
                    self._reject(problem)
                    return
                self._deliver(UserMessage(
                    text=frame.text, received_at=received, source=frame.source,
                    client_id=frame.client_id,
                ))
            case PongFrame():
                pass  # keepalive answers need no reply

    def _reject(self, reason: str) -> None:
        log.info("frame_rejected", channel=self.channel, reason=reason)
        self._deliver(FrameRejected(reason))

    def _deliver(self, message: Any) -> None:
        if not self.ctx.directory.tell("sessions", Deliver(self.channel, message)):
            self.send_frame('{"type":"error","message":"server is restarting","recoverable":true}')


def _check_chat(frame: ChatFrame) -> str | None:
    if frame.image_ids:
        if len(frame.image_ids) > MAX_IMAGE_IDS:
            return f"bad `chat` frame: at most {MAX_IMAGE_IDS} image_ids"
        return "bad `chat` frame: image_ids: this server has no image uploads, so no id is known"
    if frame.client_id is not None and not 0 < len(frame.client_id) <= MAX_CLIENT_ID:
        return f"bad `chat` frame: client_id must be 1-{MAX_CLIENT_ID} characters"
    return None
