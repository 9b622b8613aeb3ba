"""SQLite through apsw, with sqlite-vec loaded on every connection.

The store's floor: below the core, above the ground floor; it imports nothing of the core
(the values it shares with the core are in chalie/values/)."""
