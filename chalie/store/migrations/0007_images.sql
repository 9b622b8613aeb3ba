-- Images the person attached to chat messages (POST /api/images). A `chat` frame names them by
-- id; each turn that uses one sends its bytes to a vision-capable model. media_type is what
-- the bytes are (sniffed from them, not taken from the client): image/png, image/jpeg,
-- image/webp or image/gif.
CREATE TABLE images (
    id         TEXT PRIMARY KEY,
    media_type TEXT NOT NULL CHECK (media_type IN ('image/png', 'image/jpeg', 'image/webp',
                                                   'image/gif')),
    size       INTEGER NOT NULL,
    data       BLOB NOT NULL,
    created_at REAL NOT NULL
);
