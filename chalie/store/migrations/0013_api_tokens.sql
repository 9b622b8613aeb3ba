-- Scoped API tokens for the programs people already use (MCP clients, OpenAI-compatible chat
-- apps): `scopes` is the JSON list of what the token may do; only its SHA-256 is kept. A token
-- is revoked by deleting its row. `name` is unique: it names the token's channel.
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    scopes       TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   REAL NOT NULL,
    last_used_at REAL
) WITHOUT ROWID;
