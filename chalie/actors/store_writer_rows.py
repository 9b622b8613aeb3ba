"""The StoreWriter's single writes: one message, one short transaction, and the answer.

A channel's checkpoint (its Current State, with the audit record of the call that wrote it), a
housekeeping step (pruning a batch of old rows, or an incremental vacuum), login sessions, and
the rows other programs own: pairing keys, paired interfaces, their subscriptions and the world
state their signals make. None of them logs or pushes frames, so none joins the group commit.

`RowWrites` is a part of the StoreWriter, not an actor: it runs on the writer's thread, on the
writer's connection, and returns its answer for the writer to hand back or send on.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import structlog

from chalie.actors.store_writer_messages import (
    CreateApiToken,
    CreateAuthSession,
    CreatePairingKey,
    DeleteInterface,
    DeleteSubscription,
    EndAuthSession,
    PairInterface,
    Pruned,
    PruneStep,
    RevokeApiToken,
    RotateAuthSession,
    SaveCheckpoint,
    SaveSubscription,
    SaveWorld,
    TouchApiTokens,
    UpdateCapabilities,
    Vacuum,
    Vacuumed,
)
from chalie.clock import Clock
from chalie.store import (
    auth_rows,
    db,
    interface_rows,
    memory_writes,
    retention,
    token_rows,
    writes,
)

log = structlog.get_logger("chalie.store_writer")

AuthWrite = (CreateAuthSession | RotateAuthSession | EndAuthSession | CreateApiToken
             | RevokeApiToken | TouchApiTokens)
InterfaceWrite = (SaveWorld | CreatePairingKey | PairInterface | UpdateCapabilities
                  | DeleteInterface | SaveSubscription | DeleteSubscription)


class RowWrites:
    def __init__(self, conn: Callable[[], apsw.Connection], *, clock: Clock,
                 noted: Callable[[BaseException], object] = lambda e: None) -> None:
        self._conn = conn  # the writer's connection, opened when the actor starts
        self._clock = clock
        self._noted = noted  # a failed write, for the store's state (StoreWriter.noted)

    def save_checkpoint(self, m: SaveCheckpoint) -> None:
        now = self._clock.time()
        conn = self._conn()
        try:
            with db.immediate(conn):
                writes.insert_checkpoint(
                    conn, m.channel, m.text,
                    upto_transcript_id=m.upto_transcript_id, turn_id=m.turn_id, now=now,
                )
                if m.turn_id is not None:
                    memory_writes.insert_snapshots(conn, m.turn_id, m.snapshots)
                if m.compaction is not None and m.turn_id is not None:
                    writes.insert_compaction(conn, m.turn_id, m.channel, m.compaction)
        except apsw.Error as e:
            (log.warning if self._noted(e) else log.error)(  # a store fault: told once
                "checkpoint_not_stored", channel=m.channel, error=str(e))
        else:
            log.info("checkpoint_stored", channel=m.channel,
                     upto_transcript_id=m.upto_transcript_id)

    def housekeeping(self, m: PruneStep | Vacuum) -> Pruned | Vacuumed:
        """One retention step (at most a batch of rows) or incremental vacuum; the answer for
        `m.reply_to`, with the error when it failed (logged; nothing deleted)."""
        try:
            conn = self._conn()
            with db.immediate(conn):
                if isinstance(m, PruneStep):
                    done = retention.prune(conn, m.kind, m.before, m.batch)
                else:
                    done = retention.incremental_vacuum(conn, m.pages)
        except Exception as e:  # nothing deleted; the Housekeeper counts it and goes on
            (log.warning if self._noted(e) else log.error)(  # a store fault: told once
                "housekeeping_failed", step=type(m).__name__,
                      kind=getattr(m, "kind", None), error=repr(e))
            return (Pruned(m.kind, 0, m.batch, repr(e))
                    if isinstance(m, PruneStep) else Vacuumed(0, repr(e)))
        return Pruned(m.kind, done, m.batch) if isinstance(m, PruneStep) else Vacuumed(done)

    def auth_session(self, m: AuthWrite) -> bool | float | None:
        """Log in (True), rotate a token (the new row's expiry, or None) or log out (whether
        there was a session); an API token made (False: its name is taken), revoked (whether
        there was one) or used (None)."""
        conn = self._conn()
        with db.immediate(conn):
            match m:
                case CreateAuthSession():
                    auth_rows.create_session(conn, m.token_hash, created_at=m.created_at,
                                             expires_at=m.expires_at)
                    return True
                case RotateAuthSession():
                    return auth_rows.rotate_session(conn, m.old_hash, m.new_hash,
                                                    now=m.now, old_until=m.old_until)
                case EndAuthSession():
                    return auth_rows.end_session(conn, m.token_hash)
                case CreateApiToken(row=row):
                    return token_rows.insert(conn, row)
                case RevokeApiToken(token_id=token_id):
                    return token_rows.delete(conn, token_id)
                case TouchApiTokens(used=used):
                    token_rows.touch(conn, used)
                    return None

    def interface_write(self, m: InterfaceWrite) -> bool | None:
        """Other programs' rows; the answer each message's docstring names (None for
        SaveWorld, which is told)."""
        conn = self._conn()
        with db.immediate(conn):
            match m:
                case SaveWorld(signals=signals):
                    interface_rows.save_world(conn, signals)
                    return None
                case CreatePairingKey(key_hash=key_hash, created_at=created, expires_at=expires):
                    interface_rows.insert_pairing_key(conn, key_hash, created, expires)
                    return True
                case PairInterface(key_hash=key_hash, now=now, row=row):
                    return interface_rows.pair(conn, key_hash, now, row)
                case UpdateCapabilities():
                    return interface_rows.update_capabilities(
                        conn, m.interface_id, version=m.version, capabilities=m.capabilities,
                        capability_signals=m.capability_signals, refreshed_at=m.refreshed_at)
                case DeleteInterface(interface_id=interface_id):
                    return interface_rows.delete_interface(conn, interface_id)
                case SaveSubscription(row=row):
                    return interface_rows.save_subscription(conn, row)
                case DeleteSubscription(subscription_id=subscription_id):
                    return interface_rows.delete_subscription(conn, subscription_id)
