"""Memory in the store: the migration of an old database, knowledge with validity, forgetting,
vectors by space, retrieval strength and prompt snapshots, on real SQLite files."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import apsw
import pytest

from chalie.memory import fts
from chalie.memory.bit_index import BitIndex
from chalie.memory.embedders import HashedEmbedder
from chalie.store import db, memory_queries, memory_writes
from chalie.store.effects import RememberFact
from chalie.store.memory_writes import EpisodeRow, SnapshotRow
from chalie.values.memory import Kind, mkey

TIMEOUT_MS = 2000
DIM = 384  # the hashed embedder's dimension


def say(conn: apsw.Connection, text: str, *, channel: str = "main", at: float = 1.0) -> int:
    with db.immediate(conn):
        return memory_writes.add_transcript(conn, channel, None, role="user", text=text, at=at)


def try_remember(conn: apsw.Connection, key: str, value: str, *, now: float,
                 observed_at: float | None = None) -> int | None:
    with db.immediate(conn):
        return memory_writes.remember(conn, RememberFact(key, value, observed_at=observed_at),
                                      turn_id="t", now=now)


def remember(conn: apsw.Connection, key: str, value: str, *, now: float,
             observed_at: float | None = None) -> int:
    """Store a fact that must be new, and return its id."""
    item_id = try_remember(conn, key, value, now=now, observed_at=observed_at)
    assert item_id is not None
    return item_id


def episode(gist: str, *, upto: int, salience: float = 0.5) -> EpisodeRow:
    return EpisodeRow(gist=gist, intent="", outcome="", entities=(), open_loops=(),
                      salience=salience, valence=0.0, transcript_from=1, transcript_to=upto,
                      happened_at=5.0)


def add_episode(conn: apsw.Connection, gist: str, *, upto: int, channel: str = "main") -> int:
    with db.immediate(conn):
        (item_id,) = memory_writes.insert_episodes(conn, channel, [episode(gist, upto=upto)],
                                                   upto_transcript_id=upto, encoding_id="enc",
                                                   now=5.0)
    return item_id


def space(conn: apsw.Connection, name: str = "hashed-v1-384") -> int:
    with db.immediate(conn):
        return memory_writes.ensure_space(conn, name, now=1.0)


def vector(text: str) -> bytes:
    return HashedEmbedder().embed_one(text)


def embed(conn: apsw.Connection, space_id: int, kind: Kind, rows: list[tuple[int, str]], *,
          upto_id: int | None = None) -> int:
    with db.immediate(conn):
        return memory_writes.store_vectors(
            conn, space_id, "hashed", kind, [(i, vector(t)) for i, t in rows],
            upto_id=max(i for i, _ in rows) if upto_id is None else upto_id, now=7.0)


def fts_keys(conn: apsw.Connection) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT rowid FROM memory_fts")}


def bit_keys(conn: apsw.Connection, space_id: int) -> set[int]:
    """What recall's first pass (the sign bits, read from the store) can find in the space."""
    return set(BitIndex(space_id).nearest(conn, vector("anything at all"), 1000))


def vector_keys(conn: apsw.Connection, space_id: int) -> set[int]:
    return {int(r[0]) for r in conn.execute(
        "SELECT mkey FROM vectors WHERE space_id = ?", (space_id,))}


def strength_keys(conn: apsw.Connection) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT mkey FROM memory_strength")}


def tables(conn: apsw.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


# --- migration from an old database ---------------------------------------------------------------

def _old_database(data_dir: Path) -> None:
    """A database as a Chalie of schema version 3 left it: migrations 0001-0003 only."""
    data_dir.mkdir(parents=True)
    conn = db.connect(db.db_path(data_dir), busy_timeout_ms=TIMEOUT_MS)
    files = resources.files("chalie.store").joinpath("migrations").iterdir()
    for entry in sorted((e for e in files if e.name.endswith(".sql")), key=lambda e: e.name):
        number = int(entry.name.split("_", 1)[0])
        if number <= 3:
            with conn:
                conn.execute(entry.read_text(encoding="utf-8"))
                conn.execute(f"PRAGMA user_version = {number}")
    with conn:
        conn.execute(
            "INSERT INTO transcript (channel, turn_id, role, text, created_at) "
            "VALUES ('main', NULL, 'user', 'my parrot is called Kiwi', 5.0)")
        for key, value, at in [("Favourite colour", "teal", 10.0), ("pet", "parrot", 15.0),
                               ("favorite color", "green", 20.0)]:
            conn.execute(
                "INSERT INTO knowledge (key, value, turn_id, created_at, search_text) "
                "VALUES (?, ?, 'old', ?, casefold(?) || char(31) || casefold(?))",
                (key, value, at, key, value))
    conn.close()


@pytest.fixture
def migrated(data_dir: Path) -> Iterator[apsw.Connection]:
    _old_database(data_dir)
    conn = db.open_writer(data_dir, busy_timeout_ms=TIMEOUT_MS, synchronous="FULL")
    yield conn
    conn.close()


def test_an_old_database_is_migrated_to_the_latest_version_with_normalised_keys(
    migrated: apsw.Connection,
) -> None:
    """Opening a version-3 database brings it to the latest version with every key in its one
    spelling; of the two colour facts only the newer one stays current."""
    assert migrated.execute("PRAGMA user_version").fetchall() == [(db.latest_version(),)]
    assert migrated.execute(
        "SELECT key, value, created_at, superseded_at, kind, source FROM knowledge ORDER BY id"
    ).fetchall() == [
        ("favorite color", "teal", 10.0, 20.0, "fact", "tool"),
        ("pet", "parrot", 15.0, None, "fact", "tool"),
        ("favorite color", "green", 20.0, None, "fact", "tool"),
    ]
    assert [(r["key"], r["value"]) for r in memory_queries.knowledge_rows(
        migrated, query="color", history=False, limit=10, offset=0)] == [
        ("favorite color", "green")]


def test_an_old_databases_messages_and_current_facts_are_found_by_full_text(
    migrated: apsw.Connection,
) -> None:
    """After the migration a word said long ago and the current facts are found by search;
    the superseded colour is not."""
    message, pet, green = mkey(Kind.TRANSCRIPT, 1), mkey(Kind.KNOWLEDGE, 2), mkey(Kind.KNOWLEDGE, 3)
    assert fts.search(migrated, "Kiwi", 10) == [message]
    assert set(fts.search(migrated, "parrot", 10)) == {message, pet}
    assert fts.search(migrated, "green", 10) == [green]
    assert fts.search(migrated, "favourite colour", 10) == [green]
    assert fts.search(migrated, "teal", 10) == []


def test_a_fact_is_remembered_over_a_migrated_key_in_any_spelling(
    migrated: apsw.Connection,
) -> None:
    """After the migration, "My Favourite Colour" meets the stored key and supersedes green."""
    new_id = remember(migrated, "My Favourite Colour", "blue", now=30.0)
    assert migrated.execute(
        "SELECT id, value, superseded_at, superseded_by FROM knowledge "
        "WHERE key = 'favorite color' ORDER BY id"
    ).fetchall() == [(1, "teal", 20.0, 3), (3, "green", 30.0, new_id),
                     (new_id, "blue", None, None)]


def test_a_fact_superseded_by_the_migration_points_to_the_one_that_replaced_it(
    migrated: apsw.Connection,
) -> None:
    """In the knowledge history, the old teal colour says which fact replaced it (green)."""
    rows = memory_queries.knowledge_rows(migrated, query="teal", history=True, limit=10,
                                         offset=0)
    assert [(r["value"], r["current"], r["valid_to"], r["superseded_by"]) for r in rows] == [
        ("teal", False, 20.0, 3)]


def test_ids_of_a_migrated_database_are_never_reused(migrated: apsw.Connection) -> None:
    """After forgetting the newest migrated fact, the next fact gets a new id, not its old one."""
    with db.immediate(migrated):
        assert memory_writes.forget_knowledge(migrated, 3, now=30.0) is True
    assert remember(migrated, "city", "Lyon", now=31.0) == 4


# --- remember -------------------------------------------------------------------------------------

def test_a_new_value_supersedes_the_old_one_which_leaves_the_full_text_index(
    writer: apsw.Connection,
) -> None:
    """Remembering a new colour keeps the old one with its validity; only the new one is found."""
    old_id = remember(writer, "favorite color", "teal", now=10.0)
    new_id = remember(writer, "favorite color", "green", now=20.0)
    assert writer.execute(
        "SELECT id, value, created_at, superseded_at, superseded_by FROM knowledge ORDER BY id"
    ).fetchall() == [(old_id, "teal", 10.0, 20.0, new_id), (new_id, "green", 20.0, None, None)]
    assert fts_keys(writer) == {mkey(Kind.KNOWLEDGE, new_id)}
    assert fts.search(writer, "teal", 10) == []
    assert fts.search(writer, "green", 10) == [mkey(Kind.KNOWLEDGE, new_id)]


def test_remembering_the_same_value_again_changes_nothing(writer: apsw.Connection) -> None:
    """Repeating a fact returns None and leaves the single row and its index entry as they were."""
    first = remember(writer, "pet", "parrot", now=10.0)
    assert try_remember(writer, "pet", "parrot", now=20.0) is None
    assert writer.execute(
        "SELECT id, value, created_at, superseded_at FROM knowledge").fetchall() == [
        (first, "parrot", 10.0, None)]
    assert fts_keys(writer) == {mkey(Kind.KNOWLEDGE, first)}


def test_a_key_in_another_spelling_meets_the_stored_one(writer: apsw.Connection) -> None:
    """ "Favourite Colour" supersedes the fact stored under "favorite color"."""
    old_id = remember(writer, "favorite color", "teal", now=10.0)
    new_id = remember(writer, "Favourite Colour", "green", now=20.0)
    assert writer.execute(
        "SELECT id, key, value, superseded_by FROM knowledge ORDER BY id").fetchall() == [
        (old_id, "favorite color", "teal", new_id), (new_id, "favorite color", "green", None)]


def test_a_fact_observed_before_the_current_value_does_not_supersede_it(
    writer: apsw.Connection,
) -> None:
    """What the encoder read in older messages does not overwrite what was learned since; a
    value observed after the current one replaces it from the time it was observed."""
    current = remember(writer, "city", "Lyon", now=100.0)
    assert try_remember(writer, "city", "Paris", now=200.0, observed_at=50.0) is None
    assert writer.execute("SELECT id, value, superseded_at FROM knowledge").fetchall() == [
        (current, "Lyon", None)]
    newer = remember(writer, "city", "Nice", now=300.0, observed_at=150.0)
    assert writer.execute(
        "SELECT id, value, created_at, superseded_at, superseded_by FROM knowledge ORDER BY id"
    ).fetchall() == [(current, "Lyon", 100.0, 150.0, newer), (newer, "Nice", 150.0, None, None)]
    assert fts.search(writer, "Nice", 10) == [mkey(Kind.KNOWLEDGE, newer)]


# --- forgetting -----------------------------------------------------------------------------------

def _fully_indexed_fact(conn: apsw.Connection, key: str, value: str) -> tuple[int, int, int]:
    """A current fact with a full-text row, a vector, a bit-index row and a strength."""
    item_id = remember(conn, key, value, now=10.0)
    space_id = space(conn)
    embed(conn, space_id, Kind.KNOWLEDGE, [(item_id, f"{key}: {value}")])
    key_ = mkey(Kind.KNOWLEDGE, item_id)
    with db.immediate(conn):
        memory_writes.record_recalls(conn, [key_], now=11.0)
    assert key_ in fts_keys(conn) & bit_keys(conn, space_id) & vector_keys(conn, space_id)
    assert key_ in strength_keys(conn)
    return item_id, key_, space_id


def test_forgetting_a_fact_removes_it_and_every_index_row(writer: apsw.Connection) -> None:
    """A forgotten fact leaves no row, no full-text row, no vector, no bit-index row and no
    strength, and its value is recorded to be blanked out."""
    other = remember(writer, "pet", "parrot", now=9.0)
    item_id, key, space_id = _fully_indexed_fact(writer, "car", "red van")
    with db.immediate(writer):
        assert memory_writes.forget_knowledge(writer, item_id, now=50.0) is True
    assert writer.execute("SELECT id FROM knowledge").fetchall() == [(other,)]
    assert fts_keys(writer) == {mkey(Kind.KNOWLEDGE, other)}
    assert key not in vector_keys(writer, space_id) | bit_keys(writer, space_id)
    assert strength_keys(writer) == set()
    assert memory_queries.forgotten(writer) == [("red van", 50.0)]


def test_forgetting_happens_in_the_callers_one_transaction(writer: apsw.Connection) -> None:
    """When the transaction that forgets fails, the fact and all its index rows are still there."""
    item_id, key, space_id = _fully_indexed_fact(writer, "car", "red van")

    def forget_then_fail() -> None:
        with db.immediate(writer):
            memory_writes.forget_knowledge(writer, item_id, now=50.0)
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        forget_then_fail()
    assert writer.execute("SELECT value FROM knowledge").fetchall() == [("red van",)]
    assert key in fts_keys(writer) & vector_keys(writer, space_id) & bit_keys(writer, space_id)
    assert key in strength_keys(writer)
    assert memory_queries.forgotten(writer) == []


def test_forgetting_by_key_in_any_spelling_removes_the_current_fact(
    writer: apsw.Connection,
) -> None:
    """ "Favourite Colour" forgets the fact under "favorite color"; the older value stays
    superseded (forgetting never brings an old value back)."""
    old_id = remember(writer, "favorite color", "teal", now=10.0)
    new_id = remember(writer, "favorite color", "green", now=20.0)
    with db.immediate(writer):
        assert memory_writes.forget_key(writer, "Favourite Colour", now=30.0) is True
    assert writer.execute(
        "SELECT id, value, superseded_at, superseded_by FROM knowledge").fetchall() == [
        (old_id, "teal", 20.0, None)]
    assert fts_keys(writer) == set()
    assert fts.search(writer, "green", 10) == []
    assert memory_queries.forgotten(writer) == [("green", 30.0)]
    assert new_id > old_id


def test_a_forgotten_value_shorter_than_three_characters_is_not_recorded(
    writer: apsw.Connection,
) -> None:
    """Forgetting "42" deletes the fact but does not blank "42" out of every old text."""
    short = remember(writer, "age", "42", now=10.0)
    spaced = remember(writer, "initials", " j  k ", now=11.0)
    with db.immediate(writer):
        assert memory_writes.forget_knowledge(writer, short, now=20.0) is True
        assert memory_writes.forget_knowledge(writer, spaced, now=21.0) is True
    assert writer.execute("SELECT count(*) FROM knowledge").fetchall() == [(0,)]
    assert memory_queries.forgotten(writer) == [("j k", 21.0)]


def test_forgetting_something_unknown_returns_false_and_changes_nothing(
    writer: apsw.Connection,
) -> None:
    """An unknown fact id, key or episode id is reported as not found and nothing is deleted."""
    fact = remember(writer, "pet", "parrot", now=10.0)
    message = say(writer, "hello there Kiwi")
    before = (fts_keys(writer), writer.execute("SELECT * FROM knowledge").fetchall())
    with db.immediate(writer):
        assert memory_writes.forget_knowledge(writer, 999, now=20.0) is False
        assert memory_writes.forget_key(writer, "car", now=20.0) is False
        assert memory_writes.forget_episode(writer, 999) is False
    assert (fts_keys(writer), writer.execute("SELECT * FROM knowledge").fetchall()) == before
    assert fts_keys(writer) == {mkey(Kind.KNOWLEDGE, fact), mkey(Kind.TRANSCRIPT, message)}
    assert memory_queries.forgotten(writer) == []


def test_ids_of_forgotten_items_are_never_handed_out_again(writer: apsw.Connection) -> None:
    """A fact or episode stored after the newest one was forgotten gets an id past it, so
    embedding (which has already passed that id) does not skip it."""
    fact = remember(writer, "car", "red van", now=1.0)
    gist = add_episode(writer, "Talked about the car", upto=0)
    with db.immediate(writer):
        memory_writes.forget_knowledge(writer, fact, now=2.0)
        memory_writes.forget_episode(writer, gist)
    assert remember(writer, "car", "blue bike", now=3.0) > fact
    assert add_episode(writer, "Talked about the bike", upto=0) > gist


def test_forgetting_an_episode_removes_it_and_every_index_row(writer: apsw.Connection) -> None:
    """A forgotten episode is no longer found, embedded or strong; the other one is untouched."""
    message = say(writer, "we planned the trip to Lisbon")
    lisbon = add_episode(writer, "Planned a trip to Lisbon", upto=message)
    porto = add_episode(writer, "Planned a trip to Porto", upto=message)
    space_id = space(writer)
    embed(writer, space_id, Kind.EPISODE, [(lisbon, "Planned a trip to Lisbon"),
                                           (porto, "Planned a trip to Porto")])
    lisbon_key, porto_key = mkey(Kind.EPISODE, lisbon), mkey(Kind.EPISODE, porto)
    with db.immediate(writer):
        memory_writes.record_recalls(writer, [lisbon_key, porto_key], now=8.0)
        assert memory_writes.forget_episode(writer, lisbon) is True
    assert writer.execute("SELECT id FROM episodes").fetchall() == [(porto,)]
    assert fts.search(writer, "Lisbon", 10) == [mkey(Kind.TRANSCRIPT, message)]
    assert vector_keys(writer, space_id) == {porto_key}
    assert bit_keys(writer, space_id) == {porto_key}
    assert strength_keys(writer) == {porto_key}


# --- vectors --------------------------------------------------------------------------------------

def test_the_first_vectors_record_the_spaces_dimension(writer: apsw.Connection) -> None:
    """Storing vectors into a new space records its dimension, labels each vector row with its
    embedder and dimension, moves the space's progress, and the bit pass finds them (no
    sqlite-vec table: the bits are kept in memory)."""
    first = say(writer, "my parrot is called Kiwi")
    second = say(writer, "Kiwi likes apples")
    space_id = space(writer)
    assert memory_queries.space_dim(writer, space_id) is None
    stored = embed(writer, space_id, Kind.TRANSCRIPT, [(first, "my parrot is called Kiwi"),
                                                       (second, "Kiwi likes apples")])
    assert stored == 2
    assert memory_queries.space_dim(writer, space_id) == DIM
    assert not {t for t in tables(writer) if t.startswith("vec_index")}
    assert writer.execute(
        "SELECT mkey, embedder, dim, length(embedding), created_at FROM vectors ORDER BY mkey"
    ).fetchall() == [(mkey(Kind.TRANSCRIPT, first), "hashed", DIM, DIM * 4, 7.0),
                     (mkey(Kind.TRANSCRIPT, second), "hashed", DIM, DIM * 4, 7.0)]
    assert bit_keys(writer, space_id) == {mkey(Kind.TRANSCRIPT, first),
                                          mkey(Kind.TRANSCRIPT, second)}
    assert memory_queries.progress(writer, space_id) == {
        Kind.TRANSCRIPT: second, Kind.EPISODE: 0, Kind.KNOWLEDGE: 0}
    query = vector("parrot called Kiwi")
    assert BitIndex(space_id).nearest(writer, query, 1) == [mkey(Kind.TRANSCRIPT, first)]


def test_progress_never_moves_back(writer: apsw.Connection) -> None:
    """A late batch with a lower mark leaves the space's progress where it was."""
    ids = [say(writer, f"message number {n}") for n in range(3)]
    space_id = space(writer)
    embed(writer, space_id, Kind.TRANSCRIPT, [(ids[2], "message number 2")])
    embed(writer, space_id, Kind.TRANSCRIPT, [(ids[0], "message number 0")])
    assert memory_queries.progress(writer, space_id)[Kind.TRANSCRIPT] == ids[2]


def test_items_forgotten_or_superseded_since_they_were_read_get_no_vector(
    writer: apsw.Connection,
) -> None:
    """Vectors of a fact forgotten or a value superseded while it was being embedded are
    dropped; the progress still moves past them."""
    superseded = remember(writer, "pet", "parrot", now=1.0)
    forgotten = remember(writer, "car", "red van", now=2.0)
    kept = remember(writer, "city", "Lyon", now=3.0)
    gone_episode = add_episode(writer, "Talked about the weather", upto=0)
    remember(writer, "pet", "cat", now=4.0)  # supersedes `superseded`
    with db.immediate(writer):
        memory_writes.forget_knowledge(writer, forgotten, now=5.0)
        memory_writes.forget_episode(writer, gone_episode)
    space_id = space(writer)
    stored = embed(writer, space_id, Kind.KNOWLEDGE,
                   [(superseded, "pet: parrot"), (forgotten, "car: red van"),
                    (kept, "city: Lyon")], upto_id=kept)
    assert stored == 1
    assert embed(writer, space_id, Kind.EPISODE, [(gone_episode, "Talked about the weather")]) == 0
    assert vector_keys(writer, space_id) == {mkey(Kind.KNOWLEDGE, kept)}
    assert bit_keys(writer, space_id) == {mkey(Kind.KNOWLEDGE, kept)}
    assert memory_queries.progress(writer, space_id)[Kind.KNOWLEDGE] == kept
    assert memory_queries.progress(writer, space_id)[Kind.EPISODE] == gone_episode


def test_a_batch_of_mixed_dimensions_is_refused(writer: apsw.Connection) -> None:
    """Vectors of two dimensions in one batch raise ValueError and store nothing."""
    first, second = say(writer, "one"), say(writer, "two")
    space_id = space(writer)
    with pytest.raises(ValueError, match="different dimensions"), db.immediate(writer):
        memory_writes.store_vectors(writer, space_id, "hashed", Kind.TRANSCRIPT,
                                    [(first, vector("one")), (second, b"\x00" * 4 * 8)],
                                    upto_id=second, now=7.0)
    assert memory_queries.space_dim(writer, space_id) is None
    assert vector_keys(writer, space_id) == set()
    assert memory_queries.progress(writer, space_id)[Kind.TRANSCRIPT] == 0


def test_a_dimension_other_than_the_spaces_is_refused(writer: apsw.Connection) -> None:
    """Once a space holds 384-dimension vectors, an 8-dimension batch raises ValueError."""
    first, second = say(writer, "one"), say(writer, "two")
    space_id = space(writer)
    embed(writer, space_id, Kind.TRANSCRIPT, [(first, "one")])
    with pytest.raises(ValueError, match="holds 384-dimensional vectors, got 8"), \
            db.immediate(writer):
        memory_writes.store_vectors(writer, space_id, "other", Kind.TRANSCRIPT,
                                    [(second, b"\x00\x00\x80\x3f" * 8)], upto_id=second,
                                    now=7.0)
    assert memory_queries.space_dim(writer, space_id) == DIM
    assert vector_keys(writer, space_id) == {mkey(Kind.TRANSCRIPT, first)}
    assert memory_queries.progress(writer, space_id)[Kind.TRANSCRIPT] == first


def test_a_message_an_episode_covers_keeps_its_vector_and_its_bits(
    writer: apsw.Connection,
) -> None:
    """An episode standing for messages takes nothing out of the vector pass: a line worded
    unlike the question is found by its meaning or not at all (issue 22)."""
    covered = say(writer, "we planned the trip to Lisbon")
    later = say(writer, "and then to Porto")
    other_channel = say(writer, "Lisbon again", channel="other")
    space_id = space(writer)
    embed(writer, space_id, Kind.TRANSCRIPT, [(covered, "we planned the trip to Lisbon"),
                                              (later, "and then to Porto"),
                                              (other_channel, "Lisbon again")])
    add_episode(writer, "Planned a trip to Lisbon", upto=covered)
    keys = {mkey(Kind.TRANSCRIPT, i) for i in (covered, later, other_channel)}
    assert memory_queries.encoded_upto(writer, "main") == covered
    assert vector_keys(writer, space_id) == keys
    assert bit_keys(writer, space_id) == keys


def test_a_window_another_encoder_already_stored_is_not_stored_twice(
    writer: apsw.Connection,
) -> None:
    """Episodes for a window that no longer starts at the channel's mark are dropped whole."""
    first, second = say(writer, "we planned Lisbon"), say(writer, "and then Porto")
    with db.immediate(writer):
        stored = memory_writes.insert_episodes(
            writer, "main", [episode("Planned Lisbon and Porto", upto=second)],
            upto_transcript_id=second, encoding_id="enc-1", now=5.0, after_transcript_id=0)
        late = memory_writes.insert_episodes(
            writer, "main", [episode("Planned Lisbon", upto=first)],
            upto_transcript_id=first, encoding_id="enc-2", now=6.0, after_transcript_id=0)
    assert stored is not None
    assert len(stored) == 1
    assert late is None
    assert writer.execute("SELECT gist, encoding_id FROM episodes").fetchall() == [
        ("Planned Lisbon and Porto", "enc-1")]
    assert memory_queries.encoded_upto(writer, "main") == second


def test_dropping_a_stale_space_goes_in_batches_then_removes_everything(
    writer: apsw.Connection,
) -> None:
    """A stale space loses `batch` vectors per call; the last call drops its progress and its
    row, and the current space is untouched."""
    ids = [say(writer, f"note {n}") for n in range(5)]
    stale, current = space(writer, "old-embedder"), space(writer, "hashed-v1-384")
    for space_id in (stale, current):
        embed(writer, space_id, Kind.TRANSCRIPT, [(i, f"note {n}") for n, i in enumerate(ids)])
    done = []
    for _ in range(3):
        with db.immediate(writer):
            done.append(memory_writes.drop_space(writer, stale, batch=2))
        if not done[-1]:
            assert len(vector_keys(writer, stale)) == 5 - 2 * len(done)
    assert done == [False, False, True]
    assert vector_keys(writer, stale) == set()
    assert writer.execute("SELECT id FROM vector_spaces").fetchall() == [(current,)]
    assert writer.execute(
        "SELECT DISTINCT space_id FROM vector_progress").fetchall() == [(current,)]
    assert len(vector_keys(writer, current)) == 5
    assert len(bit_keys(writer, current)) == 5


def test_a_space_is_created_once_by_name(writer: apsw.Connection) -> None:
    """Asking for the same space twice gives the same id; another name gets another."""
    first = space(writer, "hashed-v1-384")
    assert space(writer, "hashed-v1-384") == first
    assert space(writer, "openai:nomic-embed-text") != first
    assert memory_queries.stale_spaces(writer, first) == [first + 1]


# --- retrieval strength and snapshots -------------------------------------------------------------

def test_recording_recalls_counts_up_and_ignores_items_that_are_gone(
    writer: apsw.Connection,
) -> None:
    """Each recall adds one (a key twice in one turn counts once) and stamps the time; keys of
    forgotten or never-stored items are ignored."""
    message = mkey(Kind.TRANSCRIPT, say(writer, "my parrot is called Kiwi"))
    fact_id = remember(writer, "car", "red van", now=1.0)
    fact = mkey(Kind.KNOWLEDGE, fact_id)
    with db.immediate(writer):
        memory_writes.forget_knowledge(writer, fact_id, now=2.0)
        memory_writes.record_recalls(writer, [message, message, fact, mkey(Kind.EPISODE, 7)],
                                     now=10.0)
    assert memory_queries.strengths(writer, [message, fact]) == {message: (1, 10.0)}
    with db.immediate(writer):
        memory_writes.record_recalls(writer, [message], now=20.0)
    assert memory_queries.strengths(writer, [message]) == {message: (2, 20.0)}


def _snapshot(n: int) -> SnapshotRow:
    return SnapshotRow(call=n, purpose="turn", system="You are Chalie.", messages="[]",
                       tools="[]", response_format=None, created_at=float(n))


def test_pruning_snapshots_keeps_the_last_turns(writer: apsw.Connection) -> None:
    """With five turns' prompts stored, keeping two leaves exactly the last two turns' prompts."""
    with db.immediate(writer):
        for turn in range(5):
            memory_writes.insert_snapshots(writer, f"turn-{turn}", [_snapshot(1), _snapshot(2)])
        memory_writes.prune_snapshots(writer, 2)
    assert writer.execute(
        "SELECT turn_id, call FROM prompt_snapshots ORDER BY id").fetchall() == [
        ("turn-3", 1), ("turn-3", 2), ("turn-4", 1), ("turn-4", 2)]
    assert [s["call"] for s in memory_queries.snapshots(writer, "turn-4")] == [1, 2]
    assert memory_queries.snapshots(writer, "turn-2") == []


def test_pruning_with_fewer_turns_than_kept_deletes_nothing(writer: apsw.Connection) -> None:
    """Two turns' prompts survive a prune that keeps fifty."""
    with db.immediate(writer):
        for turn in range(2):
            memory_writes.insert_snapshots(writer, f"turn-{turn}", [_snapshot(1)])
        memory_writes.prune_snapshots(writer, 50)
    assert writer.execute("SELECT count(*) FROM prompt_snapshots").fetchall() == [(2,)]
