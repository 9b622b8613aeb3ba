-- Reaching the person where they are: Web Push, notification services, Telegram (issue 38).

-- A device the person enabled "Notify me on this device" on: its push service's endpoint and
-- the keys its pushes are encrypted for (RFC 8291). `failures` counts the sends in a row that
-- failed (not 404/410: those remove it), `retry_at` when the next is tried.
CREATE TABLE push_subscriptions (
    id           TEXT PRIMARY KEY,
    endpoint     TEXT NOT NULL UNIQUE,
    p256dh       TEXT NOT NULL,
    auth         TEXT NOT NULL,
    name         TEXT NOT NULL,
    created_at   REAL NOT NULL,
    last_sent_at REAL,
    failures     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    retry_at     REAL
) WITHOUT ROWID;

-- The server's VAPID key pair (RFC 8292), made on the first start. Its working copy is the
-- data directory's vapid_private.pem (0600); this row is what a backup carries.
CREATE TABLE vapid_keys (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    private_pem TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    created_at  REAL NOT NULL
);

-- Frames to deliver away from the page (notifications and escalations, and the decisions that
-- settle escalations), queued in the transaction that logs them, so a crash between the commit
-- and the delivery loses none. The Delivery actor takes them off as it records `deliveries`.
CREATE TABLE away_queue (
    channel    TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    type       TEXT NOT NULL,
    frame      TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (channel, seq)
) WITHOUT ROWID;

-- One frame delivered to one target, once: a push subscription ("push:<id>"), an Apprise URL
-- ("apprise:<hash>") or a paired Telegram chat ("telegram:<chat id>"). `service` is the
-- metric's channel label (webpush, telegram, or the Apprise service). status: pending (to send
-- at next_at), held (quiet hours: sent when they end), sent, failed (given up after retries),
-- gone (the target no longer exists), dropped (no longer worth sending: answered, expired,
-- the target removed), skipped (a page of the person's was open and visible).
CREATE TABLE deliveries (
    id          TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL
        CHECK (kind IN ('notifications', 'escalations', 'goal_results', 'scheduled_results')),
    service     TEXT NOT NULL,
    target      TEXT NOT NULL,
    target_name TEXT NOT NULL,
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    approval_id TEXT,
    exchange_id TEXT,
    status      TEXT NOT NULL
        CHECK (status IN ('pending', 'held', 'sent', 'failed', 'gone', 'dropped', 'skipped')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     REAL,
    expires_at  REAL,
    last_error  TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    sent_at     REAL,
    ref         TEXT,
    UNIQUE (channel, seq, target)
) WITHOUT ROWID;
CREATE INDEX deliveries_due ON deliveries (next_at) WHERE status IN ('pending', 'held');
CREATE INDEX deliveries_created ON deliveries (created_at);
CREATE INDEX deliveries_approval ON deliveries (approval_id) WHERE approval_id IS NOT NULL;

-- The Telegram chats paired with the bot (the person's), and the one-time codes that pair one.
CREATE TABLE telegram_chats (
    chat_id   INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,
    paired_at REAL NOT NULL
);
CREATE TABLE telegram_codes (
    code_hash  TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at    REAL
) WITHOUT ROWID;
