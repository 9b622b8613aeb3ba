-- Concepts and how they connect, drift gists, adaptive traits (issue 12).
--
-- A concept is an idea the encoder found in the conversation ("tomato garden", "Lisbon").
-- Near-duplicates merge by embedding similarity; `vector` is its unit vector in embedder space
-- `space_id`. `strength` grows each time it is mentioned and decays with time;
-- `last_activated` is when spreading activation last reached it (its cooldown).
CREATE TABLE concepts (
    id             INTEGER PRIMARY KEY,
    name           TEXT NOT NULL,
    vector         BLOB,
    space_id       INTEGER,
    strength       REAL NOT NULL,
    mentions       INTEGER NOT NULL,
    created_at     REAL NOT NULL,
    last_seen      REAL NOT NULL,
    last_activated REAL
);
CREATE UNIQUE INDEX concepts_by_name ON concepts (name);

-- How two concepts relate (a < b); `strength` grows with co-occurrence and decays with time.
CREATE TABLE concept_links (
    a          INTEGER NOT NULL REFERENCES concepts (id),
    b          INTEGER NOT NULL REFERENCES concepts (id),
    relation   TEXT NOT NULL,
    strength   REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (a, b)
) WITHOUT ROWID;
CREATE INDEX concept_links_by_b ON concept_links (b);

-- A DMN thought that was not sent: it may surface in the next user turn's context until
-- `expires_at` (created_at + cognition.gist_ttl_s).
CREATE TABLE drift_gists (
    id         INTEGER PRIMARY KEY,
    channel    TEXT NOT NULL,
    text       TEXT NOT NULL,
    concepts   TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX drift_gists_by_channel ON drift_gists (channel, expires_at);

-- Behavioural patterns learned from the person's exchanges (answer_length, active_hours,
-- language, tone): `value` is JSON, `weight` the evidence behind it, decaying with time.
CREATE TABLE adaptive_traits (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    weight     REAL NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
