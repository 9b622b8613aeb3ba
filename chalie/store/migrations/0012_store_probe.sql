-- One row the StoreWriter rewrites to learn whether the store takes writes again after a write
-- failed (its disk full, read-only or failing): a real write, as small as one can be.
CREATE TABLE store_probe (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at REAL NOT NULL
);
