-- What a channel's conversation is about and where it stands (issue 12).
--
-- A topic gathers the messages of a channel that are about one thing: `centroid` is the sum of
-- its messages' unit vectors in embedder space `space_id` (compared by cosine, so its length
-- does not matter; NULL when no vector could be made), `keywords` their content words for
-- matching without vectors. `fok` is Chalie's feeling of knowing about it, 0 to 5.
CREATE TABLE topics (
    id         TEXT PRIMARY KEY,
    channel    TEXT NOT NULL,
    name       TEXT NOT NULL,
    keywords   TEXT NOT NULL,
    centroid   BLOB,
    space_id   INTEGER,
    messages   INTEGER NOT NULL,
    fok        REAL NOT NULL,
    created_at REAL NOT NULL,
    last_seen  REAL NOT NULL
);
CREATE INDEX topics_by_channel ON topics (channel, last_seen);

-- One row per channel: its current topic and streak, its focus, the conversation's phase, the
-- last turn's confidence and mode, and the situation model (JSON).
CREATE TABLE channel_state (
    channel         TEXT PRIMARY KEY,
    topic_id        TEXT,
    streak          INTEGER NOT NULL,
    focus_id        TEXT,
    phase           TEXT NOT NULL,
    exchanges       INTEGER NOT NULL,
    confidence      REAL,
    mode            TEXT,
    last_message_at REAL,
    situation       TEXT NOT NULL,
    updated_at      REAL NOT NULL
) WITHOUT ROWID;
