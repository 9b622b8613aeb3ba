-- Recall shows the episode that covers a recalled message: find it by the end of its span.
CREATE INDEX episodes_by_span ON episodes (channel, transcript_to);
