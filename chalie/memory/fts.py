"""Full-text search over memory without ever handing user text to MATCH.

A query is cut into terms by SQLite's own FTS5 tokenizer (the one the index uses: porter over
unicode61, diacritics removed), so quotes, `* : ( ) - ^`, AND/OR/NOT/NEAR and any other
punctuation are split away or become plain words; each term is then written as a quoted string.
Stop words are dropped, and of the rest the rarest in the index are searched (their document
frequencies come from the fts5vocab table), as many as match at most MAX_POSTINGS rows together:
rare words say the most, and words in every other message would make BM25 rank thousands of
rows, on every turn, for next to nothing. When even the rarest word is in more than
MAX_TERM_ITEMS items, the newest items holding it stand in for a BM25 ranking. A British or
American spelling also searches for the other one ("favourite colour" finds "favorite color"),
from the table knowledge keys are normalised with.
"""

from __future__ import annotations

import re
import threading
import time
import weakref

import apsw

from chalie.values.keys import SPELLINGS

MAX_TERMS = 8  # the rarest terms of a query that are searched
MAX_POSTINGS = 400  # rows those terms may match together (the rarest term is always searched)
POSTINGS_PER_RESULT = 4  # ... or this many per result asked for, when more are asked for
MAX_TERM_ITEMS = 3000  # when even the rarest word is in more items, the newest matches stand in
MAX_QUERY_CHARS = 4000  # a query longer than this is cut (a pasted document is not a query)

# Common English words that carry no meaning for recall, and the words of asking a memory
# ("do you remember", "what did I say about"); tokenized like the index at first use.
STOP_WORDS = frozenset("".join(
    "a about above after again against all am an and any are as at be because been before being "
    "below between both but by can could did do does doing down during each few for from further "
    "had has have having he her here hers herself him himself his how i if in into is it its "
    "itself just me more most my myself no nor not now of off on once only or other our ours "
    "ourselves out over own same she should so some such than that the their theirs them "
    "themselves then there these they this those through to too under until up very was we were "
    "what when where which while who whom why will with would you your yours yourself yourselves "
    "tell get got also please thanks thank hi hello hey ok okay yes yeah "
    # words about remembering, which questions to a memory are full of and memories are not:
    "remember remind recall say said says tell told talk talked mention mentioned ask asked "
    # what the tokenizer leaves of contractions, which it splits at the apostrophe:
    # I'm, it's, don't, we'll, you're, I've, I'd, isn't ...
    "m s t ll re ve d don doesn didn isn aren wasn weren hasn haven hadn couldn shouldn wouldn"
).split())

Tokenize = apsw.FTS5Tokenizer
_WORD = re.compile(r"\w+")
_BRITISH = {american: british for british, american in SPELLINGS.items()}


_tokenizers: weakref.WeakKeyDictionary[apsw.Connection, tuple[Tokenize, frozenset[str]]] = (
    weakref.WeakKeyDictionary())
_lock = threading.Lock()


def _tokenizer(conn: apsw.Connection) -> tuple[Tokenize, frozenset[str]]:
    """The index's tokenizer on this connection, and the stop words as it spells them."""
    with _lock:
        found = _tokenizers.get(conn)
    if found is None:
        tokenize = conn.fts5_tokenizer(
            "porter", ["unicode61", "remove_diacritics", "2"])
        stops = frozenset(t for w in STOP_WORDS for t in _terms(tokenize, w))
        found = (tokenize, stops)
        with _lock:
            _tokenizers[conn] = found
    return found


def _terms(tokenize: Tokenize, text: str) -> list[str]:
    tokens = tokenize(text.encode("utf-8", "replace"), apsw.FTS5_TOKENIZE_QUERY, None,
                      include_offsets=False, include_colocated=False)
    return [t if isinstance(t, str) else str(t[-1]) for t in tokens]


def query_terms(conn: apsw.Connection, text: str) -> list[str]:
    """The distinct searchable terms of `text`, in order, without stop words."""
    tokenize, stops = _tokenizer(conn)
    text = text[:MAX_QUERY_CHARS]
    variants = [v for w in _WORD.findall(text.casefold())
                if (v := SPELLINGS.get(w) or _BRITISH.get(w))]
    terms = _terms(tokenize, " ".join([text, *variants]))
    return [t for t in dict.fromkeys(terms) if t not in stops]


def match_expression(terms: list[str]) -> str:
    """An FTS5 query that matches any of `terms`, each as a quoted string (so no term is ever
    read as an operator, a column filter or a prefix)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def search(conn: apsw.Connection, text: str, limit: int, *, kind: int | None = None) -> list[int]:
    """Memory keys of the items that best match `text` by BM25, best first; with `kind`, only
    items of that kind (chalie.values.memory.Kind)."""
    return search_terms(conn, query_terms(conn, text), limit, kind=kind)


def search_terms(conn: apsw.Connection, terms: list[str], limit: int, *,
                 kind: int | None = None) -> list[int]:
    """`search` for terms already cut (`query_terms`): recall's second pass
    (chalie.memory.feedback) searches the question's terms with words of what it found."""
    if not terms or limit <= 0:
        return []
    frequency = _frequencies(conn, terms)
    present = sorted((t for t in terms if frequency.get(t)), key=lambda t: frequency[t])
    if not present:
        return []
    if frequency[present[0]] > MAX_TERM_ITEMS:
        # Only common words: ranking thousands of rows by BM25 would tell little and cost
        # much; the newest items that hold the rarest of them stand in (rowid order is cheap).
        return _newest_matches(conn, present[:3], limit, kind)
    chosen: list[str] = []
    postings = 0
    most = max(MAX_POSTINGS, POSTINGS_PER_RESULT * limit)
    for term in present[:MAX_TERMS]:  # rarest first, while BM25 has few rows to rank
        if chosen and postings + frequency[term] > most:
            break
        chosen.append(term)
        postings += frequency[term]
    expression = match_expression(chosen)
    if kind is None:
        rows = conn.execute(
            "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rank LIMIT ?",
            (expression, limit)).fetchall()
    else:
        rows = conn.execute(
            "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? AND (rowid & 3) = ? "
            "ORDER BY rank LIMIT ?", (expression, int(kind), limit)).fetchall()
    return [int(r[0]) for r in rows]  # type: ignore[arg-type]


def _newest_matches(conn: apsw.Connection, terms: list[str], limit: int,
                    kind: int | None) -> list[int]:
    where = "memory_fts MATCH ?" + ("" if kind is None else " AND (rowid & 3) = ?")
    params: list[object] = [match_expression(terms)]
    if kind is not None:
        params.append(int(kind))
    rows = conn.execute(f"SELECT rowid FROM memory_fts WHERE {where} ORDER BY rowid DESC "
                        "LIMIT ?", (*params, limit)).fetchall()
    return [int(r[0]) for r in rows]  # type: ignore[arg-type]


_DF_TTL_S = 60.0  # document frequencies change slowly; they only order terms and cap work
_DF_KEPT = 20_000
_df: dict[tuple[str, str], tuple[int, float]] = {}
_df_lock = threading.Lock()


def frequencies(conn: apsw.Connection, terms: list[str]) -> dict[str, int]:
    """How many items hold each term (a minute's cache: see `_frequencies`)."""
    return _frequencies(conn, terms)


def _frequencies(conn: apsw.Connection, terms: list[str]) -> dict[str, int]:
    """How many items hold each term, from a cache of the last minute (per database) or the
    fts5vocab table: counting a common term's rows costs more than the search it decides
    about. A term found nowhere is never cached, so a word said a moment ago is found."""
    now, db_file = time.monotonic(), conn.filename or f":memory:{id(conn)}"
    found: dict[str, int] = {}
    with _df_lock:
        for term in terms:
            hit = _df.get((db_file, term))
            if hit is not None and now - hit[1] < _DF_TTL_S:
                found[term] = hit[0]
    missing = [t for t in terms if t not in found]
    if missing:
        marks = ",".join("?" * len(missing))
        counted = {str(t): int(d) for t, d in conn.execute(
            f"SELECT term, doc FROM memory_fts_terms WHERE term IN ({marks})", missing)}
        with _df_lock:
            if len(_df) > _DF_KEPT:
                _df.clear()
            for term in missing:
                found[term] = counted.get(term, 0)
                if found[term]:
                    _df[(db_file, term)] = (found[term], now)
    return found
