-- The situation model's summarised part (issue 12): what is going on for the person, as the
-- encoder's existing call summarises it with each window of a channel's conversation.
CREATE TABLE situation_summaries (
    channel            TEXT PRIMARY KEY,
    summary            TEXT NOT NULL,
    upto_transcript_id INTEGER NOT NULL,
    updated_at         REAL NOT NULL
) WITHOUT ROWID;
