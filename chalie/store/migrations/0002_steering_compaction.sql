-- Mid-turn steering, compaction audit records, channel checkpoints, approvals.

ALTER TABLE tool_calls ADD COLUMN approval TEXT
    CHECK (approval IS NULL OR approval IN ('approved', 'denied', 'expired'));
ALTER TABLE tool_calls ADD COLUMN ran INTEGER NOT NULL DEFAULT 1;

CREATE TABLE steering (
    turn_id         TEXT NOT NULL REFERENCES turns (id),
    position        INTEGER NOT NULL,
    text            TEXT NOT NULL,
    after_iteration INTEGER NOT NULL,
    PRIMARY KEY (turn_id, position)
) WITHOUT ROWID;

-- One row per compaction: stage 'trail' (stage 1), 'restart' (stage 2) or 'backstop' (at the
-- turn boundary). turn_id is the turn it ran in (or after, for the backstop).
CREATE TABLE compactions (
    id            INTEGER PRIMARY KEY,
    turn_id       TEXT NOT NULL,
    channel       TEXT NOT NULL,
    stage         TEXT NOT NULL CHECK (stage IN ('trail', 'restart', 'backstop')),
    tokens_before INTEGER NOT NULL,
    tokens_after  INTEGER NOT NULL,
    tokens_used   INTEGER NOT NULL,
    summary       TEXT NOT NULL,
    created_at    REAL NOT NULL
);
CREATE INDEX compactions_by_turn ON compactions (turn_id);

-- The channel's "Current State": a summary of its transcript up to upto_transcript_id.
-- The newest one is prepended to every prompt; only later transcript lines follow it.
CREATE TABLE checkpoints (
    id                 INTEGER PRIMARY KEY,
    channel            TEXT NOT NULL,
    text               TEXT NOT NULL,
    upto_transcript_id INTEGER NOT NULL,
    turn_id            TEXT,
    created_at         REAL NOT NULL
);
CREATE INDEX checkpoints_by_channel ON checkpoints (channel, id);
