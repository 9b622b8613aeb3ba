"""Retention: what is deleted once it is old enough, in small steps, and keeping the file compact.

Each `prune_*` function runs on the writer connection inside the caller's transaction, deletes
at most `batch` rows and returns how many it deleted; the Housekeeper calls one kind at a time
(through the StoreWriter) until a step deletes fewer than a batch, so no transaction holds up
the turns queued behind it for long. What goes, and what is kept on purpose:

What was said is kept by default: with `store.transcript_days` = 0 (the shipped value) the
Housekeeper leaves the transcript, images and checkpoints whole, and recall finds the very words
of any day. Deleting them is a choice the person makes by setting `store.transcript_days` > 0;
then, and only then, the first three kinds below run.

- transcript: messages older than `store.transcript_days`, only once the channel's episodes
  cover them (id <= encodings.upto_transcript_id), with their full-text, vector (every space)
  and retrieval-strength rows. The newest message of the whole store always stays, so its id
  is never handed out again (transcript ids are rowids: encoding marks, vector progress and
  memory keys count on them growing). The turn a pruned message belongs to keeps its row
  (tokens and timings feed the spending report, the DMN reads when the person was last active,
  client ids still deduplicate) but loses the text: `user_text` becomes '' with the user's
  line, `response_text` NULL with the assistant's, and the turn's steering and compaction
  records go with its user line. History and recall read the transcript, so they see less,
  never something broken; checkpoints are summaries and do not need the lines they summarise.
- images: uploaded more than `store.transcript_days` ago (a turn sends them to the model once,
  the transcript keeps only text; the store does not record which turn used which image).
- checkpoints: older than `store.transcript_days`, except each channel's newest (the only one
  a prompt reads).
- tool_calls: records of turns finished more than `store.tool_calls_days` ago.
- events: frames logged more than `store.events_days` ago, except each channel's newest (its
  seq is where the next frame's seq follows on).
- dmn_runs: older than `store.events_days`, except the newest of each trigger and the newest
  that called the model (what the Dmn reads when it starts).
- auth_sessions and pairing_keys: expired ones.

Left as they are: turns (see above), knowledge with its history and episodes (memory), goals,
schedules and schedule_runs (exactly-once marks), proactive (deferred messages wait there) and
spending (the spending report reaches back 366 days), topics and concepts (bounded by decay
elsewhere), prompt snapshots (memory.snapshots_kept, pruned by the StoreWriter).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

import apsw
import structlog

from chalie.errors import StoreError
from chalie.store.memory_writes import unindex
from chalie.values.memory import Kind, mkey

log = structlog.get_logger("chalie.retention")

PruneKind = Literal["transcript", "images", "checkpoints", "tool_calls", "events", "dmn_runs",
                    "auth_sessions", "pairing_keys"]
KINDS: tuple[PruneKind, ...] = get_args(PruneKind)
AUTO_VACUUM_INCREMENTAL = 2


def prune_transcript(conn: apsw.Connection, before: float, batch: int) -> int:
    """Messages created before `before` and covered by their channel's episodes."""
    newest = conn.execute("SELECT max(id) FROM transcript").fetchone()
    if newest is None or newest[0] is None:
        return 0
    keep_id = int(newest[0])
    marks = conn.execute("SELECT channel, upto_transcript_id FROM encodings ORDER BY channel")
    deleted = 0
    for channel, upto in marks.fetchall():
        if deleted >= batch:
            break
        assert isinstance(upto, int)
        # Oldest first, stopping at the first message that is not old enough: ids follow time
        # (a message a little out of order waits for the next run), so a step reads about as
        # many rows as it deletes, however long the channel's recent history is.
        lines = []
        for line_id, role, turn_id, created_at in conn.execute(
            "SELECT id, role, turn_id, created_at FROM transcript WHERE channel = ? AND id <= ? "
            "ORDER BY id LIMIT ?", (channel, min(upto, keep_id - 1), batch - deleted),
        ):
            if created_at >= before:
                break
            lines.append((int(line_id), str(role), turn_id))
        for line_id, role, turn_id in lines:
            conn.execute("DELETE FROM transcript WHERE id = ?", (line_id,))
            unindex(conn, mkey(Kind.TRANSCRIPT, line_id))
            if turn_id is not None:
                _forget_turn_text(conn, str(turn_id), role)
        deleted += len(lines)
    return deleted


def _forget_turn_text(conn: apsw.Connection, turn_id: str, role: str) -> None:
    if role in ("user", "program"):
        conn.execute("UPDATE turns SET user_text = '' WHERE id = ?", (turn_id,))
        conn.execute("DELETE FROM steering WHERE turn_id = ?", (turn_id,))
        conn.execute("DELETE FROM compactions WHERE turn_id = ?", (turn_id,))
    else:
        conn.execute("UPDATE turns SET response_text = NULL WHERE id = ?", (turn_id,))


def prune_images(conn: apsw.Connection, before: float, batch: int) -> int:
    conn.execute("DELETE FROM images WHERE id IN (SELECT id FROM images WHERE created_at < ? "
                 "LIMIT ?)", (before, batch))
    return conn.changes()


def prune_checkpoints(conn: apsw.Connection, before: float, batch: int) -> int:
    conn.execute(
        "DELETE FROM checkpoints WHERE id IN (SELECT id FROM checkpoints AS c WHERE "
        "created_at < ? AND id < (SELECT max(id) FROM checkpoints WHERE channel = c.channel) "
        "LIMIT ?)", (before, batch))
    return conn.changes()


def prune_tool_calls(conn: apsw.Connection, before: float, batch: int) -> int:
    """Tool-call records of turns that finished before `before`."""
    # Through turns_by_path (path, finished_at): only old turns are read, never the table.
    conn.execute(
        "DELETE FROM tool_calls WHERE (turn_id, position) IN (SELECT c.turn_id, c.position "
        "FROM turns AS t INDEXED BY turns_by_path JOIN tool_calls AS c ON c.turn_id = t.id "
        "WHERE t.path IN ('user', 'dmn', 'scheduled', 'goal') AND t.finished_at < ? LIMIT ?)",
        (before, batch))
    return conn.changes()


# The event log's channels, one index seek each: SELECT DISTINCT would read every row.
_CHANNELS = (
    "WITH RECURSIVE c(channel) AS (SELECT min(channel) FROM events UNION ALL "
    "SELECT (SELECT min(channel) FROM events WHERE channel > c.channel) FROM c "
    "WHERE c.channel IS NOT NULL) SELECT channel FROM c WHERE channel IS NOT NULL"
)


def prune_events(conn: apsw.Connection, before: float, batch: int) -> int:
    """Frames logged before `before`, each channel's newest kept."""
    deleted = 0
    for (channel,) in conn.execute(_CHANNELS).fetchall():
        if deleted >= batch:
            break
        last = None
        for seq, created_at in conn.execute(
            "SELECT seq, created_at FROM events WHERE channel = ? AND seq < (SELECT max(seq) "
            "FROM events WHERE channel = ?) ORDER BY seq LIMIT ?",
            (channel, channel, batch - deleted),
        ):
            if created_at >= before:
                break
            last = int(seq)
        if last is not None:
            conn.execute("DELETE FROM events WHERE channel = ? AND seq <= ?", (channel, last))
            deleted += conn.changes()
    return deleted


def prune_dmn_runs(conn: apsw.Connection, before: float, batch: int) -> int:
    conn.execute(
        "DELETE FROM dmn_runs WHERE id IN (SELECT id FROM dmn_runs WHERE at < ? "
        "AND id NOT IN (SELECT max(id) FROM dmn_runs GROUP BY trigger) "
        "AND id != coalesce((SELECT max(id) FROM dmn_runs WHERE turn_id IS NOT NULL), 0) "
        "ORDER BY id LIMIT ?)", (before, batch))
    return conn.changes()


def prune_auth_sessions(conn: apsw.Connection, before: float, batch: int) -> int:
    """Login sessions that expired before `before` (now)."""
    conn.execute("DELETE FROM auth_sessions WHERE token_hash IN (SELECT token_hash FROM "
                 "auth_sessions WHERE expires_at < ? LIMIT ?)", (before, batch))
    return conn.changes()


def prune_pairing_keys(conn: apsw.Connection, before: float, batch: int) -> int:
    """Pairing keys that expired before `before` (now), used or not."""
    conn.execute("DELETE FROM pairing_keys WHERE key_hash IN (SELECT key_hash FROM "
                 "pairing_keys WHERE expires_at < ? LIMIT ?)", (before, batch))
    return conn.changes()


_PRUNERS: dict[PruneKind, Callable[[apsw.Connection, float, int], int]] = {
    "transcript": prune_transcript,
    "images": prune_images,
    "checkpoints": prune_checkpoints,
    "tool_calls": prune_tool_calls,
    "events": prune_events,
    "dmn_runs": prune_dmn_runs,
    "auth_sessions": prune_auth_sessions,
    "pairing_keys": prune_pairing_keys,
}


def prune(conn: apsw.Connection, kind: str, before: float, batch: int) -> int:
    """One step of `kind`: at most `batch` rows older than `before` deleted; how many were."""
    pruner = _PRUNERS.get(kind)  # type: ignore[call-overload]
    if pruner is None:
        raise ValueError(f"unknown prune kind {kind!r} (one of {', '.join(KINDS)})")
    if batch < 1:
        raise ValueError(f"store.prune_batch must be at least 1, got {batch}")
    return int(pruner(conn, before, batch))


# -- keeping the file compact --

def incremental_vacuum(conn: apsw.Connection, pages: int) -> int:
    """Return up to `pages` free pages to the file system; how many were returned."""
    before = _freelist(conn)
    if before == 0 or pages <= 0:
        return 0
    for _ in conn.execute(f"PRAGMA incremental_vacuum({int(pages)})"):
        pass  # the pragma frees one page per step of its cursor
    return before - _freelist(conn)


def _freelist(conn: apsw.Connection) -> int:
    (count,) = conn.execute("PRAGMA freelist_count").fetchone()  # type: ignore[misc]
    return int(count)


def file_bytes(db_file: Path) -> int:
    """The store's size on disk: the database file and its write-ahead log."""
    total = 0
    for path in (db_file, db_file.with_name(db_file.name + "-wal")):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


def ensure_incremental(conn: apsw.Connection, db_file: Path) -> None:
    """Make the store vacuum incrementally (auto_vacuum = INCREMENTAL). A new store gets it
    before its first table; an older one is rebuilt once with VACUUM (it takes about as long as
    copying the file, and needs about as much free space), logged with the file's size."""
    (mode,) = conn.execute("PRAGMA auto_vacuum").fetchone()  # type: ignore[misc]
    if int(mode) == AUTO_VACUUM_INCREMENTAL:
        return
    conn.execute(f"PRAGMA auto_vacuum = {AUTO_VACUUM_INCREMENTAL}")
    (tables,) = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()  # type: ignore[misc]
    if int(tables) == 0:  # a new store; in WAL mode the header is written already: rewrite it
        conn.execute("VACUUM")
        return
    size = file_bytes(db_file)
    log.warning("store_converting_to_incremental_vacuum", file=str(db_file), bytes=size)
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except apsw.Error as e:
        raise StoreError(f"cannot convert {db_file} to incremental vacuum (VACUUM needs about "
                         f"its size, {size} bytes, free beside it): {e}") from e
    log.info("store_converted_to_incremental_vacuum", file=str(db_file),
             bytes_before=size, bytes=file_bytes(db_file))
