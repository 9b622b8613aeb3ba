"""SQLite through apsw, with sqlite-vec loaded on every connection."""
