-- Other programs: pairing keys, paired interfaces, world-state signals, broadcast streams.

-- One-time keys for POST /api/interfaces/pair; only their SHA-256 is kept.
CREATE TABLE pairing_keys (
    key_hash   TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at    REAL
) WITHOUT ROWID;

-- A paired interface. `signals` is the JSON list of signal types it declared ('["*"]': any;
-- NULL: none); `capabilities` the JSON array its GET /capabilities last answered, as checked.
CREATE TABLE interfaces (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    host         TEXT NOT NULL,
    port         INTEGER NOT NULL,
    signals      TEXT,
    token_hash   TEXT NOT NULL UNIQUE,
    version      TEXT NOT NULL DEFAULT '',
    capabilities TEXT NOT NULL,
    paired_at    REAL NOT NULL,
    refreshed_at REAL NOT NULL
) WITHOUT ROWID;

-- World state: at most signals.world_max rows, rewritten as a whole (it is small).
CREATE TABLE world_signals (
    id                TEXT PRIMARY KEY,
    sender            TEXT NOT NULL,
    signal_type       TEXT NOT NULL,
    content           TEXT NOT NULL,
    source            TEXT NOT NULL,
    topic             TEXT,
    activation_energy REAL NOT NULL,
    metadata          TEXT,
    received_at       REAL NOT NULL
) WITHOUT ROWID;

-- Broadcast streams Chalie reads signals from. `signals` as for interfaces (never NULL).
CREATE TABLE subscriptions (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    url        TEXT NOT NULL,
    signals    TEXT NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID;
