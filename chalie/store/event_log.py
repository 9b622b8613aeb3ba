"""The event log's rows: frames numbered for a channel, and the ending of turns a crash cut off.

Every frame a client sees is a row of `events` with its channel's next `seq`. `sequenced` turns
frames into those rows; the StoreWriter inserts them inside the transaction that also moves its
count of seqs on. A turn whose frames stop short of `done` or `error` was cut off (the server
crashed, or the Session did): `interrupted_frames` are what closes it, and
`close_interrupted_turns` closes every such turn at server start, before any actor runs.
"""

from __future__ import annotations

import apsw
import structlog

from chalie.frames import Done, Error, Frame, encode_frame, frame_type
from chalie.store import db, queries, writes

# The StoreWriter's logger: closing a cut-off turn logs the same line at start-up as when the
# writer does it for a restarted Session.
log = structlog.get_logger("chalie.store_writer")

Row = tuple[int, str, str | None, str]  # seq, type, exchange_id, encoded frame
INTERRUPTED = "this turn was interrupted by a server fault before it finished; please send it again"


def sequenced(frames: tuple[Frame, ...], last: int) -> list[Row]:
    """Event-log rows (seq, type, exchange_id, body) for frames following seq `last`."""
    rows = []
    for seq, frame in enumerate(frames, last + 1):
        exchange = getattr(frame, "exchange_id", None)
        rows.append((seq, frame_type(frame), exchange, encode_frame(frame, seq)))
    return rows


def interrupted_frames(exchange_id: str) -> tuple[Frame, ...]:
    return (
        Error(message=INTERRUPTED, recoverable=True, exchange_id=exchange_id),
        Done(duration_ms=0, exchange_id=exchange_id),
    )


def close_interrupted_turns(conn: apsw.Connection, now: float) -> int:
    """At server start no turn is running: end every turn a crash cut off. Returns how many."""
    closed = 0
    channels = [str(c) for (c,) in conn.execute("SELECT DISTINCT channel FROM events")]
    with db.immediate(conn):
        for channel in channels:
            exchange = queries.open_exchange(conn, channel)
            if exchange is None:
                continue
            log.warning("closing_interrupted_turn", channel=channel, exchange_id=exchange)
            rows = sequenced(interrupted_frames(exchange), queries.last_seq(conn, channel))
            writes.insert_events(conn, channel, rows, now)
            closed += 1
    return closed
