-- The conversation: one row per turn, its tool calls, and the transcript the prompt reads.
CREATE TABLE turns (
    id              TEXT PRIMARY KEY,
    channel         TEXT NOT NULL,
    client_id       TEXT,
    source          TEXT NOT NULL,
    user_text       TEXT NOT NULL,
    response_text   TEXT,
    outcome         TEXT NOT NULL CHECK (outcome IN ('answered', 'error', 'timeout', 'cancelled')),
    error           TEXT,
    iterations      INTEGER NOT NULL,
    llm_calls       INTEGER NOT NULL,
    tokens_total    INTEGER NOT NULL,
    response_time_s REAL NOT NULL,
    started_at      REAL NOT NULL,
    finished_at     REAL NOT NULL
);
CREATE INDEX turns_by_channel ON turns (channel, finished_at);
CREATE UNIQUE INDEX turns_by_client_id ON turns (channel, client_id) WHERE client_id IS NOT NULL;

CREATE TABLE tool_calls (
    turn_id     TEXT NOT NULL REFERENCES turns (id),
    position    INTEGER NOT NULL,
    iteration   INTEGER NOT NULL,
    call_id     TEXT NOT NULL,
    name        TEXT NOT NULL,
    args        TEXT NOT NULL,
    result      TEXT NOT NULL,
    is_error    INTEGER NOT NULL,
    duration_ms REAL NOT NULL,
    PRIMARY KEY (turn_id, position)
) WITHOUT ROWID;

CREATE TABLE transcript (
    id         INTEGER PRIMARY KEY,
    channel    TEXT NOT NULL,
    turn_id    TEXT REFERENCES turns (id),
    role       TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    text       TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX transcript_by_channel ON transcript (channel, id);

-- Facts the person asked Chalie to keep. A new value for a key supersedes the old row.
CREATE TABLE knowledge (
    id            INTEGER PRIMARY KEY,
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,
    turn_id       TEXT,
    created_at    REAL NOT NULL,
    superseded_at REAL,
    superseded_by INTEGER REFERENCES knowledge (id)
);
CREATE UNIQUE INDEX knowledge_current ON knowledge (key) WHERE superseded_at IS NULL;

-- Every server frame of a channel, in seq order, written before it is pushed.
CREATE TABLE events (
    channel     TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    type        TEXT NOT NULL,
    exchange_id TEXT,
    body        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    PRIMARY KEY (channel, seq)
) WITHOUT ROWID;

CREATE TABLE auth_password (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    password_hash TEXT NOT NULL,
    created_at    REAL NOT NULL
);

CREATE TABLE auth_sessions (
    token_hash TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
