-- What other programs say is data, never the person's orders (issue 37).

-- A tool call held for the person's approval because it came from a program's words (its
-- arguments carry what only a program said, or a program's text asked for it) on a turn the
-- person was not watching: the DMN's, a goal's, a scheduled prompt's, a program's message.
-- It is shown to the person as an `escalation` frame on `channel`, and waits: `status` waiting,
-- approved (it then ran, in the turn `ran_turn_id`), denied or expired (at `expires_at`).
CREATE TABLE held_approvals (
    id          TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    path        TEXT NOT NULL,
    tool        TEXT NOT NULL,
    args        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    provider    TEXT,
    turn_id     TEXT,
    status      TEXT NOT NULL CHECK (status IN ('waiting', 'approved', 'denied', 'expired')),
    created_at  REAL NOT NULL,
    expires_at  REAL NOT NULL,
    decided_at  REAL,
    decided_by  TEXT,
    ran_turn_id TEXT
) WITHOUT ROWID;
CREATE INDEX held_approvals_waiting ON held_approvals (expires_at) WHERE status = 'waiting';

-- "Always allow this tool": a tool that needs the person's approval (danger confirm) runs
-- without asking, per program and tool. `provider` is "interface:<id>", "mcp:<name>" or
-- "chalie" (an innate tool); `tool` the provider's own name for it; `shown_as` the name the
-- person saw when they allowed it.
CREATE TABLE tool_allowances (
    id         TEXT PRIMARY KEY,
    provider   TEXT NOT NULL,
    tool       TEXT NOT NULL,
    shown_as   TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (provider, tool)
) WITHOUT ROWID;

-- Where a fact came from: the transcript line the person stated it on (the encoder's facts);
-- NULL for a fact stored by a tool or the identity hook, in the turn `turn_id` names.
ALTER TABLE knowledge ADD COLUMN source_line INTEGER;
