-- Chalie on its own: background paths' turns, scheduled prompts, goals, proactive messages,
-- open loops, the DMN's runs and what background jobs spent.

-- Which path ran a turn: the person's (user), or a background one. A background turn is stored
-- on the channel its output went to; only what the person was told enters the transcript.
ALTER TABLE turns ADD COLUMN path TEXT NOT NULL DEFAULT 'user'
    CHECK (path IN ('user', 'dmn', 'scheduled', 'goal'));
CREATE INDEX turns_by_path ON turns (path, finished_at);

-- Scheduled prompts: one-shot (`at`, epoch seconds) or recurring (`cron`, five fields, in
-- `timezone`). next_run is NULL once it will not run again. source: person (REST), tool (the
-- person's turn), dmn (a reminder Chalie set itself); turn_id: the turn that made it.
CREATE TABLE schedules (
    id         TEXT PRIMARY KEY,
    prompt     TEXT NOT NULL,
    at         REAL,
    cron       TEXT,
    timezone   TEXT NOT NULL,
    next_run   REAL,
    last_run   REAL,
    state      TEXT NOT NULL CHECK (state IN ('active', 'done', 'missed', 'cancelled')),
    source     TEXT NOT NULL CHECK (source IN ('person', 'tool', 'dmn')),
    turn_id    TEXT,
    created_at REAL NOT NULL,
    CHECK ((at IS NULL) != (cron IS NULL))
) WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules (next_run) WHERE state = 'active';

-- Each due time of a schedule, at most once: run (done, failed) or missed while the server
-- was down. The primary key is what makes a run happen exactly once: it is written in the
-- transaction that stores the run's turn and its notification.
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL REFERENCES schedules (id),
    due_at      REAL NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('done', 'failed', 'missed')),
    turn_id     TEXT,
    ran_at      REAL NOT NULL,
    error       TEXT,
    PRIMARY KEY (schedule_id, due_at)
) WITHOUT ROWID;

-- Goals the person (or Chalie) asked it to pursue in the background, with their plan's steps.
-- iterations, elapsed_s and tokens are what all of its ACT loops used so far; paused_until is
-- set while its path waits for budget.
CREATE TABLE goals (
    id           TEXT PRIMARY KEY,
    goal         TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('pending', 'planning', 'running', 'completed',
                                                'failed', 'cancelled')),
    source       TEXT NOT NULL CHECK (source IN ('person', 'tool', 'dmn')),
    turn_id      TEXT,
    confidence   REAL,
    result       TEXT,
    error        TEXT,
    iterations   INTEGER NOT NULL DEFAULT 0,
    elapsed_s    REAL NOT NULL DEFAULT 0,
    tokens       INTEGER NOT NULL DEFAULT 0,
    paused_until REAL,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    finished_at  REAL
) WITHOUT ROWID;
CREATE INDEX goals_by_time ON goals (created_at);

CREATE TABLE goal_steps (
    goal_id     TEXT NOT NULL REFERENCES goals (id),
    step_id     TEXT NOT NULL,
    position    INTEGER NOT NULL,
    description TEXT NOT NULL,
    depends_on  TEXT NOT NULL,  -- JSON array of step ids
    status      TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    result      TEXT,
    turn_id     TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    finished_at REAL,
    PRIMARY KEY (goal_id, step_id)
) WITHOUT ROWID;

-- Every proactive message composed (by the DMN, a goal, a scheduled prompt) and what became of
-- it: sent, deferred (composed in quiet hours; waits in this table), dropped (deferred longer
-- than dmn.deferred_max_age_s), or suppressed (reason: cap). `capped`: it counts against
-- dmn.daily_cap.
CREATE TABLE proactive (
    id           INTEGER PRIMARY KEY,
    path         TEXT NOT NULL CHECK (path IN ('dmn', 'goal', 'scheduled')),
    ref          TEXT,
    channel      TEXT NOT NULL,
    content      TEXT NOT NULL,
    topic        TEXT,
    turn_id      TEXT,
    status       TEXT NOT NULL CHECK (status IN ('sent', 'deferred', 'dropped', 'suppressed')),
    reason       TEXT,
    capped       INTEGER NOT NULL,
    composed_at  REAL NOT NULL,
    delivered_at REAL
);
CREATE INDEX proactive_by_time ON proactive (composed_at);
CREATE INDEX proactive_deferred ON proactive (composed_at) WHERE status = 'deferred';

-- Threads Chalie means to raise with the person later (the DMN's SEED_THREAD, the memory
-- tool's open_loop), until closed.
CREATE TABLE open_loops (
    id         INTEGER PRIMARY KEY,
    text       TEXT NOT NULL,
    source     TEXT NOT NULL,
    turn_id    TEXT,
    created_at REAL NOT NULL,
    closed_at  REAL
);
CREATE INDEX open_loops_open ON open_loops (id) WHERE closed_at IS NULL;

-- Each DMN trigger: when, why, what it did (called, message, nothing, nothing_new, budget, ...),
-- and the fingerprint of what it had to think about (episodes, signals, goals, open loops).
CREATE TABLE dmn_runs (
    id          INTEGER PRIMARY KEY,
    trigger     TEXT NOT NULL CHECK (trigger IN ('idle', 'cadence')),
    at          REAL NOT NULL,
    result      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    turn_id     TEXT
);

-- Tokens of background LLM calls that are not turns (episode encodings, goal plans); a turn's
-- own tokens are in its row. Read at start so budgets survive a restart.
CREATE TABLE spending (
    id        INTEGER PRIMARY KEY,
    path      TEXT NOT NULL,
    tokens    INTEGER NOT NULL,
    llm_calls INTEGER NOT NULL,
    at        REAL NOT NULL,
    ref       TEXT
);
CREATE INDEX spending_by_time ON spending (at);
