"""/ws: the person's chat socket. Decode, validate, hand to the channel's Session; no replies here.

Every answer, error frames for bad input included, comes back from the Session through the
StoreWriter, so it carries the channel's `seq` and is in the event log. A bad frame never closes
the socket. `resume` replays the log from the client's last seq; the socket's own high-water
mark drops any live frame the replay already sent.
"""

from __future__ import annotations

from typing import Any

import pykka
import structlog
import tornado.websocket

from chalie.actors.background_messages import PersonConnected
from chalie.actors.session_messages import (
    ActionRequest,
    Deliver,
    FrameRejected,
    Steer,
    UserMessage,
)
from chalie.config import CHANNEL_RE
from chalie.edge.auth import COOKIE, token_hash
from chalie.edge.context import EdgeContext
from chalie.edge.frames import (
    MAX_IMAGE_ID,
    MAX_IMAGE_IDS,
    ActionFrame,
    BadFrame,
    ChatFrame,
    PongFrame,
    PresenceFrame,
    ResumeFrame,
    SteerFrame,
    decode_client_frame,
)
from chalie.frames import PING
from chalie.store.queries import events_after
from chalie.store.queries import last_seq as last_seq_of

log = structlog.get_logger("chalie.edge")

MAX_CLIENT_ID = 128
MAX_SKILL = 64


class ChatSocket(tornado.websocket.WebSocketHandler):
    def initialize(self, ctx: EdgeContext) -> None:
        self.ctx = ctx
        self.channel = "main"
        self.sent_seq = 0  # highest seq this socket has been sent
        # Until the socket's first resume: the seq of the first live frame it was sent (0: none
        # yet); None once it has resumed.
        self.first_live: int | None = 0
        self.missed_pongs = 0
        self.session: str | None = None  # the token hash of the login that opened it

    async def get(self, *args: Any, **kwargs: Any) -> None:
        token = self.get_cookie(COOKIE)
        if not self.ctx.auth.session_ok(token):
            self.set_status(401)
            self.finish({"error": "not logged in: POST /auth/login first"})
            return
        assert token is not None
        self.session = token_hash(token)  # the hub closes the socket once this login ends
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
        self._text_so_far()
        # The person is here: proactive messages that waited out quiet hours go out now.
        dmn = self.ctx.directory.get("dmn")
        if dmn is not None:
            try:
                dmn.tell(PersonConnected(self.channel))
            except pykka.ActorDeadError:
                pass  # restarting: it delivers what waits when it starts

    def on_close(self) -> None:
        self.ctx.hub.unregister(self.channel, self)
        self.ctx.metrics.ws_connections.dec()
        log.info("ws_closed", channel=self.channel, code=self.close_code)

    # -- out --

    def send_frame(self, seq: int, frame: str, *, again: bool = False) -> None:
        if seq <= self.sent_seq and not again:
            return  # already sent by a resume replay
        if self.first_live == 0:
            self.first_live = seq
        self.sent_seq = max(seq, self.sent_seq)
        self._write(frame)

    def send_live(self, frame: str) -> None:
        self._write(frame)

    def keepalive(self, max_misses: int) -> None:
        if self.missed_pongs >= max_misses:
            log.info("ws_keepalive_timeout", channel=self.channel, missed=self.missed_pongs)
            self.close(1001, "no pong")
            return
        self.missed_pongs += 1
        self._write(PING)

    def _write(self, frame: str) -> None:
        try:
            self.write_message(frame)
        except tornado.websocket.WebSocketClosedError:
            pass  # on_close unregisters it

    # -- in --

    def on_message(self, data: str | bytes) -> None:
        received = self.ctx.clock.monotonic()
        self.missed_pongs = 0  # any frame shows the client is alive
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
                    client_id=frame.client_id, image_ids=frame.image_ids,
                ))
            case SteerFrame(text=text):
                self._deliver(Steer(text=text, received_at=received))
            case ActionFrame(payload=payload, client_id=client_id):
                if not 0 < len(payload.skill) <= MAX_SKILL:
                    self._reject(f"bad `action` frame: payload.skill must be 1-{MAX_SKILL} chars")
                    return
                if client_id is not None and not 0 < len(client_id) <= MAX_CLIENT_ID:
                    self._reject(f"bad `action` frame: client_id must be 1-{MAX_CLIENT_ID} chars")
                    return
                self._deliver(ActionRequest(
                    skill=payload.skill, params=payload.params, received_at=received,
                    client_id=client_id, via="page",
                ))
            case ResumeFrame(last_seq=last_seq):
                self._resume(last_seq)
            case PresenceFrame(visible=visible):
                self.ctx.hub.seen(self, visible)
            case PongFrame():
                pass

    def _resume(self, last_seq: int) -> None:
        """Replay every logged frame after `last_seq`; live frames continue from there. A
        last_seq beyond the log (a client of a wiped server) counts as the log's end, so the
        socket still gets every frame from now on."""
        conn = self.ctx.read()
        # Live frames pushed between the connect and the first resume went out already (a run
        # of seqs, first_live to sent_seq): the replay does not send them twice.
        live = range(self.first_live, self.sent_seq + 1) if self.first_live else range(0)
        self.sent_seq = min(last_seq, last_seq_of(conn, self.channel))
        self.first_live = None
        replayed = events_after(conn, self.channel, last_seq)
        log.info("ws_resume", channel=self.channel, last_seq=last_seq, frames=len(replayed))
        for seq, frame in replayed:
            if seq in live:
                self.sent_seq = max(seq, self.sent_seq)
                continue
            self.send_frame(seq, frame)
        self._text_so_far()

    def _text_so_far(self) -> None:
        """Mid-answer, the answer's text so far (one `message_delta` with `reset`): the deltas
        sent before this socket opened or resumed are not logged, so nothing replays them."""
        frame = self.ctx.hub.text_so_far(self.channel)
        if frame is not None:
            self._write(frame)

    def _reject(self, reason: str) -> None:
        log.info("frame_rejected", channel=self.channel, reason=reason)
        self._deliver(FrameRejected(reason))

    def _deliver(self, message: Any) -> None:
        if not self.ctx.directory.tell("sessions", Deliver(self.channel, message)):
            self._write('{"type":"error","message":"server is restarting","recoverable":true}')


def _check_chat(frame: ChatFrame) -> str | None:
    if frame.image_ids:
        if len(frame.image_ids) > MAX_IMAGE_IDS:
            return f"bad `chat` frame: at most {MAX_IMAGE_IDS} image_ids"
        if any(not 0 < len(i) <= MAX_IMAGE_ID for i in frame.image_ids):
            return f"bad `chat` frame: image_ids: each id is 1-{MAX_IMAGE_ID} characters " \
                   "(as POST /api/images answered it)"
        if len(set(frame.image_ids)) != len(frame.image_ids):
            return "bad `chat` frame: image_ids: an id is given twice"
    if frame.client_id is not None and not 0 < len(frame.client_id) <= MAX_CLIENT_ID:
        return f"bad `chat` frame: client_id must be 1-{MAX_CLIENT_ID} characters"
    return None
