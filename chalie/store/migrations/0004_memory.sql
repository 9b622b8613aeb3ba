-- Memory that lasts: a full-text index over everything said and remembered, episodes, vectors
-- by embedder, retrieval strength, prompt snapshots, and knowledge with kind, source and
-- confidence. chalie_key() (the knowledge key normaliser) is registered by the migrator.

-- Knowledge: what kind of item, where it came from and how sure Chalie is. created_at and
-- superseded_at are its validity interval. Ids are never reused (AUTOINCREMENT: forgetting the
-- newest item must not hand its id to the next, which the embedding progress has passed), so
-- the table is rebuilt. Keys are normalised anew ("Favourite colour" and "favorite color"
-- meet); of two current facts that now share a key the newer one stays current.
CREATE TABLE knowledge_v4 (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,
    turn_id       TEXT,
    created_at    REAL NOT NULL,
    superseded_at REAL,
    superseded_by INTEGER REFERENCES knowledge (id),
    search_text   TEXT NOT NULL DEFAULT '',
    kind          TEXT NOT NULL DEFAULT 'fact' CHECK (kind IN ('fact', 'trait', 'preference')),
    source        TEXT NOT NULL DEFAULT 'tool' CHECK (source IN ('tool', 'identity', 'encoder')),
    confidence    REAL NOT NULL DEFAULT 0.9
);
INSERT INTO knowledge_v4 (id, key, value, turn_id, created_at, superseded_at, superseded_by,
                          search_text)
    SELECT id, key, value, turn_id, created_at, superseded_at, superseded_by, search_text
    FROM knowledge;
DROP TABLE knowledge;
ALTER TABLE knowledge_v4 RENAME TO knowledge;
CREATE UNIQUE INDEX knowledge_current ON knowledge (key) WHERE superseded_at IS NULL;
CREATE INDEX knowledge_search ON knowledge (search_text, key, value, created_at)
    WHERE superseded_at IS NULL;
-- The identity section reads the current traits and preferences on every turn.
CREATE INDEX knowledge_identity ON knowledge (kind, confidence, created_at)
    WHERE superseded_at IS NULL AND kind != 'fact';
UPDATE knowledge SET
        superseded_at = (
            SELECT max(newer.created_at) FROM knowledge AS newer
            WHERE newer.superseded_at IS NULL AND chalie_key(newer.key) = chalie_key(knowledge.key)),
        superseded_by = (
            SELECT max(newer.id) FROM knowledge AS newer
            WHERE newer.superseded_at IS NULL AND chalie_key(newer.key) = chalie_key(knowledge.key))
    WHERE superseded_at IS NULL AND chalie_key(key) != '' AND id NOT IN (
        SELECT max(id) FROM knowledge WHERE superseded_at IS NULL GROUP BY chalie_key(key));
UPDATE knowledge SET key = chalie_key(key) WHERE chalie_key(key) != '' AND key != chalie_key(key);
UPDATE knowledge SET search_text = casefold(key) || char(31) || casefold(value);

-- Episodes: what a window of a channel's transcript was about, written by the Encoder.
-- transcript_from/to are the transcript ids it covers; happened_at is the time of the last one.
CREATE TABLE episodes (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    channel         TEXT NOT NULL,
    gist            TEXT NOT NULL,
    intent          TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    entities        TEXT NOT NULL,  -- JSON array of strings
    open_loops      TEXT NOT NULL,  -- JSON array of strings
    salience        REAL NOT NULL CHECK (salience BETWEEN 0 AND 1),
    valence         REAL NOT NULL CHECK (valence BETWEEN -1 AND 1),
    transcript_from INTEGER NOT NULL,
    transcript_to   INTEGER NOT NULL,
    encoding_id     TEXT NOT NULL,
    happened_at     REAL NOT NULL,
    created_at      REAL NOT NULL
);
CREATE INDEX episodes_by_channel ON episodes (channel, id);

-- How far each channel's transcript has been encoded into episodes.
CREATE TABLE encodings (
    channel            TEXT PRIMARY KEY,
    upto_transcript_id INTEGER NOT NULL,
    encoded_at         REAL NOT NULL
) WITHOUT ROWID;

-- One full-text index over transcript messages, episodes and current knowledge. A row's rowid
-- is its item's memory key: item id * 4 + kind (1 transcript, 2 episode, 3 knowledge).
-- Contentless: the text lives in the item's own table; rows are deleted by rowid.
CREATE VIRTUAL TABLE memory_fts USING fts5(
    text, content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
-- Document frequency of each indexed term, to search with the rarest words of a query first.
CREATE VIRTUAL TABLE memory_fts_terms USING fts5vocab(memory_fts, 'row');

INSERT INTO memory_fts (rowid, text) SELECT id * 4 + 1, text FROM transcript;
INSERT INTO memory_fts (rowid, text)
    SELECT id * 4 + 3, key || ': ' || value FROM knowledge WHERE superseded_at IS NULL;

-- Vector spaces: one per embedder configuration (`memory.embedder` and its model). Recall uses
-- only the current one; the others are dropped once the current one has caught up.
-- Each space with a known dimension has a sqlite-vec index vec_index_<id> (bit[dim], the
-- binary-quantised vectors) whose rowids are memory keys.
CREATE TABLE vector_spaces (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    dim        INTEGER,
    created_at REAL NOT NULL
);

-- The float32 vectors, for re-ranking; each row records the embedder and dimension that made it.
-- A rowid table: a vector of 1.5 KB fits in its page here, where a WITHOUT ROWID row that size
-- spills to an overflow page read on its own.
CREATE TABLE vectors (
    id         INTEGER PRIMARY KEY,
    space_id   INTEGER NOT NULL REFERENCES vector_spaces (id),
    mkey       INTEGER NOT NULL,
    embedder   TEXT NOT NULL,
    dim        INTEGER NOT NULL,
    embedding  BLOB NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (space_id, mkey)
);
CREATE INDEX vectors_by_mkey ON vectors (mkey);

-- How far each kind of item has been embedded into each space (items are embedded in id order).
CREATE TABLE vector_progress (
    space_id INTEGER NOT NULL,
    kind     INTEGER NOT NULL,
    upto_id  INTEGER NOT NULL,
    PRIMARY KEY (space_id, kind)
) WITHOUT ROWID;

-- Retrieval strength: how often an item was recalled into a prompt, and when last.
CREATE TABLE memory_strength (
    mkey             INTEGER PRIMARY KEY,
    recalls          INTEGER NOT NULL,
    last_recalled_at REAL NOT NULL
);

-- Values the person asked Chalie to forget. Text older than the forgetting is shown to the
-- model with these values blanked out, wherever it comes from (history, recall, Current State).
CREATE TABLE forgotten (
    id           INTEGER PRIMARY KEY,
    value        TEXT NOT NULL,
    forgotten_at REAL NOT NULL
);

-- The exact requests of every LLM call (system prompt, messages, tools, response format), by
-- the turn (or background job) they belong to; kept for the last memory.snapshots_kept turns.
CREATE TABLE prompt_snapshots (
    id              INTEGER PRIMARY KEY,
    turn_id         TEXT NOT NULL,
    call            INTEGER NOT NULL,
    purpose         TEXT NOT NULL,
    system          TEXT NOT NULL,
    messages        TEXT NOT NULL,  -- JSON [{"role", "content"}]
    tools           TEXT NOT NULL,  -- JSON [{"name", "description", "parameters"}]
    response_format TEXT,           -- JSON {"name", "schema"} or NULL
    created_at      REAL NOT NULL
);
CREATE INDEX prompt_snapshots_by_turn ON prompt_snapshots (turn_id, call);
