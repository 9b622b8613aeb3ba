"""Knowledge that updates: which current facts a new fact may make untrue.

A new fact supersedes the current one under its own (normalised) key by itself. But people say
the same thing many ways: "home: Lisbon", stored a year ago, and "city: Porto" today are both
about where they live, and only the meaning tells. So when a fact is stored, the current facts
under other keys that it may contradict are found and shown to the model, which names the ones
the new fact replaces (`RememberFact.replaces`); a fact that is merely related ("visited:
Porto") replaces nothing, and that judgement is the model's, never a similarity threshold's.

Candidates come two ways, best first:
- by meaning: the cosine similarity of the facts' stored vectors (`key: value`, embedded by the
  Encoder in the background) to the new fact's, at least `memory.update_similarity`;
- by the words of their keys: a current fact whose key shares a word (three letters or more)
  with the new key, which also finds facts stored too recently to be embedded yet.
The encoder sees the window's lines, not one fact: each of the person's lines is embedded (one
batch) and the facts nearest to any of them are shown in its prompt (`memory.encoder_known_facts`).
When the embedder fails, only the key words find candidates: storing a fact never fails for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import apsw
import structlog

from chalie.memory.embedders import Embedder
from chalie.prompts import Prompts
from chalie.store import fact_rows
from chalie.store.fact_rows import Before, StoredFact
from chalie.values.memory import knowledge_text

log = structlog.get_logger("chalie.memory")

MIN_KEY_WORD = 3  # shorter words of a key ("my", "of") say nothing about its subject
PER_LINE = 5  # the encoder: facts nearest to each of the person's lines, before the best are kept


def candidates(conn: apsw.Connection, *, key: str, value: str, embedder: Embedder | None,
               space_id: int, limit: int, min_similarity: float, timeout_s: float,
               exclude: Sequence[int] = ()) -> list[StoredFact]:
    """The current facts, under keys other than `key`, that the fact `key: value` may make
    untrue: by meaning first, then by the words of their keys, at most `limit`."""
    if limit <= 0:
        return []
    skip = set(exclude)
    found: dict[int, StoredFact] = {}
    if embedder is not None:
        try:
            (vector,) = embedder.embed([knowledge_text(key, value)], timeout_s=timeout_s)
        except Exception as e:  # EmbedError, or a broken embedder: the key words still find some
            log.warning("fact_not_embedded", error=str(e), embedder=embedder.kind)
        else:
            for fact in fact_rows.nearest_current(conn, space_id, vector, limit + 1 + len(skip)):
                if fact.similarity is not None and fact.similarity < min_similarity:
                    break
                if fact.key != key and fact.id not in skip:
                    found.setdefault(fact.id, fact)
    for fact in fact_rows.sharing_key_words(conn, key_words(key), limit + 1 + len(skip)):
        if fact.key != key and fact.id not in skip:
            found.setdefault(fact.id, fact)
    return list(found.values())[:limit]


def for_lines(conn: apsw.Connection, lines: Sequence[tuple[int, str]], *,
              embedder: Embedder, space_id: int, limit: int, min_similarity: float,
              timeout_s: float) -> list[StoredFact]:
    """The current facts nearest in meaning to any of `lines` ((transcript id, text): the
    person's lines of an encoder's window), the most similar first, at most `limit`. A line
    already embedded (the Encoder indexes new lines within memory.index_delay_s) is compared
    by its stored vector; the others are embedded in one batch. [] when the embedder fails."""
    if limit <= 0 or not lines or not fact_rows.any_embedded(conn, space_id):
        return []
    stored = fact_rows.line_vectors(conn, space_id, [i for i, _ in lines])
    missing = [text for i, text in lines if i not in stored]
    try:
        fresh = embedder.embed(missing, timeout_s=timeout_s) if missing else []
    except Exception as e:  # EmbedError, or a broken embedder: the encoding goes on without
        log.warning("window_not_embedded", error=str(e), embedder=embedder.kind)
        return []
    best: dict[int, StoredFact] = {}
    for vector in [*stored.values(), *fresh]:
        for fact in fact_rows.nearest_current(conn, space_id, vector, PER_LINE):
            similarity = fact.similarity or 0.0
            if similarity < min_similarity:
                break
            seen = best.get(fact.id)
            if seen is None or (seen.similarity or 0.0) < similarity:
                best[fact.id] = fact
    return sorted(best.values(), key=lambda f: -(f.similarity or 0.0))[:limit]


def key_words(key: str) -> list[str]:
    """The words of a normalised key that can tell its subject."""
    return [w for w in dict.fromkeys(key.replace("_", " ").split()) if len(w) >= MIN_KEY_WORD]


def day(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")


def listed(prompts: Prompts, fact: StoredFact) -> str:
    """A candidate as the model sees it: its id (what `replaces` names), key, value and since."""
    return prompts.fragment("fact_candidate", id=str(fact.id), key=fact.key, value=fact.value,
                            since=day(fact.since))


def with_history(prompts: Prompts, key: str, text: str, since: float,
                 before: Sequence[Before]) -> str:
    """A current fact's line (`text`, under `key`) with what it replaced, compactly: "home:
    Porto (since 2026-05-02; before: Lisbon)"; `text` as it is when it replaced nothing."""
    if not before:
        return text
    values = "; ".join(b.value if b.key == key else f"{b.key}: {b.value}" for b in before)
    return prompts.fragment("fact_history", text=text, since=day(since), before=values)
