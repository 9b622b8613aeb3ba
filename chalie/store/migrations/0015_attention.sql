-- Chalie acting on its own (issue 36): the signal types an interface declares in its
-- GET /capabilities, the programs' lines in the person's transcript, the DMN's `signal`
-- trigger, and goals that run without a plan, tell their progress, expire and say why they
-- ended. SQLite cannot change a CHECK in place: transcript, dmn_runs and goals are rebuilt
-- (ids kept), as its documentation's twelve steps do.

-- The signal types an interface declared in GET /capabilities ({"tools", "signals"}), as a
-- JSON list; NULL when it declared none. `signals` stays what the pair request declared
-- (NULL: it declared none): a declared list there wins, then this one, else any type.
ALTER TABLE interfaces ADD COLUMN capability_signals TEXT;

-- A program's line in the person's transcript (role 'program'): an interface's message, said
-- by `speaker` (the program's name), beside the answer Chalie gave the person.
CREATE TABLE transcript_new (
    id         INTEGER PRIMARY KEY,
    channel    TEXT NOT NULL,
    turn_id    TEXT REFERENCES turns (id),
    role       TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'program')),
    text       TEXT NOT NULL,
    created_at REAL NOT NULL,
    speaker    TEXT,
    CHECK ((role = 'program') = (speaker IS NOT NULL))
);
INSERT INTO transcript_new (id, channel, turn_id, role, text, created_at)
    SELECT id, channel, turn_id, role, text, created_at FROM transcript;
DROP TABLE transcript;
ALTER TABLE transcript_new RENAME TO transcript;
CREATE INDEX transcript_by_channel ON transcript (channel, id);

-- The DMN's runs: a `signal` trigger too, with the ids of the signals that woke it (JSON).
CREATE TABLE dmn_runs_new (
    id          INTEGER PRIMARY KEY,
    trigger     TEXT NOT NULL CHECK (trigger IN ('idle', 'cadence', 'signal')),
    at          REAL NOT NULL,
    result      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    turn_id     TEXT,
    signals     TEXT
);
INSERT INTO dmn_runs_new (id, trigger, at, result, fingerprint, turn_id)
    SELECT id, trigger, at, result, fingerprint, turn_id FROM dmn_runs;
DROP TABLE dmn_runs;
ALTER TABLE dmn_runs_new RENAME TO dmn_runs;

-- Goals: `expired` (paused longer than goals.expire_days); `mode` plan (steps from a checked
-- plan) or plain (one bounded loop on the goal's text, after two plans failed the checks,
-- whose problems `plan_problems` keeps as a JSON list); `paused_at` since when it waits for
-- budget; `progress_at` when the person last heard of its progress; `end_reason` why it ended.
CREATE TABLE goals_new (
    id            TEXT PRIMARY KEY,
    goal          TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'planning', 'running', 'completed',
                                                 'failed', 'cancelled', 'expired')),
    source        TEXT NOT NULL CHECK (source IN ('person', 'tool', 'dmn')),
    turn_id       TEXT,
    confidence    REAL,
    result        TEXT,
    error         TEXT,
    iterations    INTEGER NOT NULL DEFAULT 0,
    elapsed_s     REAL NOT NULL DEFAULT 0,
    tokens        INTEGER NOT NULL DEFAULT 0,
    paused_until  REAL,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    finished_at   REAL,
    mode          TEXT CHECK (mode IN ('plan', 'plain')),
    plan_problems TEXT,
    paused_at     REAL,
    progress_at   REAL,
    end_reason    TEXT
) WITHOUT ROWID;
INSERT INTO goals_new (id, goal, state, source, turn_id, confidence, result, error, iterations,
                       elapsed_s, tokens, paused_until, created_at, updated_at, finished_at,
                       mode, paused_at)
    SELECT id, goal, state, source, turn_id, confidence, result, error, iterations, elapsed_s,
           tokens, paused_until, created_at, updated_at, finished_at,
           CASE WHEN EXISTS (SELECT 1 FROM goal_steps s WHERE s.goal_id = goals.id)
                THEN 'plan' END,
           CASE WHEN paused_until IS NOT NULL THEN updated_at END
    FROM goals;
DROP TABLE goals;
ALTER TABLE goals_new RENAME TO goals;
CREATE INDEX goals_by_time ON goals (created_at);
