"""A turn's context: what the prompt says about the person, the channel and the past.

Read on a worker thread before the first LLM call of a turn (the query embedding is computed
here too, never on the Session's mailbox): the identity (name, traits, preferences), the
channel's Current State, what hybrid recall finds for the message, the tools and the literal
recent history; then fitted to the budgets of chalie.memory.assembly and rendered with the
fragments of prompts/fragments.toml. Everything older than a forgetting is redacted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime

import apsw
import msgspec
import structlog

from chalie.llm.types import ToolSpec, estimate_tokens
from chalie.memory import assembly, updates
from chalie.memory.assembly import PINNED, Piece
from chalie.memory.recall import Hit, Recall, Recalled
from chalie.memory.redact import Redactor
from chalie.prompts import Prompts
from chalie.store import fact_rows, queries
from chalie.store import memory_queries as mq
from chalie.store.effects import RememberFact
from chalie.store.fact_rows import Before
from chalie.store.queries import Checkpoint, HistoryLine
from chalie.values.memory import Item, Kind, MemoryLine, knowledge_text, memory_text, mkey
from chalie.world.signals import Salient

log = structlog.get_logger("chalie.memory")

NAME_KEY = "name"  # the knowledge key of the person's name: always in the prompt
MEMORY_ITEM_CHARS = 600  # a recalled message longer than this is shown cut, with an ellipsis
# Recall is asked for at most one item per this many tokens of the memory section's budget
# (and at most memory.recall_k): few items are shorter, so the section can fill.
MEMORY_ITEM_TOKENS = 20
RENDERED_KEPT = 2048  # memory lines kept rendered: a turn shows a few hundred (at most recall_k)
# The best recalled items (not their neighbours) whose retrieval strength the turn reinforces,
# whose words tell whether the answer used what recall found (chalie.cognition.mind.judge), and
# which give their room to the turn's own tool trail last (chalie.act.budget.shed): a memory
# section filled to its budget holds many items that only came along.
REINFORCED = 12
_encode = msgspec.json.encode


class ContextSettings(msgspec.Struct, frozen=True):
    context_window: int
    reply_reserve: float
    shares: dict[str, float]
    history_turns: int
    recall_k: int


class TurnContext(msgspec.Struct, frozen=True):
    identity: str
    state: str
    history: tuple[HistoryLine, ...]
    tools: tuple[ToolSpec, ...]
    recalled: tuple[int, ...]  # memory keys of the best REINFORCED items of the memory section
    history_upto: int  # the channel's last transcript id: what a checkpoint now would cover
    tokens: dict[str, int]  # what each section used
    degraded: str | None = None
    world: str = ""  # the fenced world-state section, or "" when no signal is salient
    vector: bytes | None = None  # the message's embedding, when recall made one
    recall_s: float = 0.0  # what recall took
    embed_wait_s: float = 0.0  # of it, waiting for the message's embedding
    recalled_texts: tuple[str, ...] = ()  # the texts of the items of `recalled`
    worlds: int = 0  # signals in the world-state section
    situation: str = ""  # where the conversation stands and the drift gists: every turn anew
    history_from: int = 0  # transcript id of the history's first line (0: no history)
    memory_fill: float = 0.0  # the share of the memory section's budget recall filled
    memory_lines: tuple[MemoryLine, ...] = ()  # the memory section, line by line
    # Whose words the prompt shows (chalie/act/provenance.py): the person's (their lines,
    # what they had remembered) and other programs' (their lines, signals).
    person_texts: tuple[str, ...] = ()
    program_texts: tuple[str, ...] = ()

    @property
    def memory(self) -> str:
        """The memory section as the prompt shows it."""
        return memory_text(self.memory_lines)


def build(
    conn: apsw.Connection,
    *,
    channel: str,
    text: str,
    recall: Recall,
    prompts: Prompts,
    system: str,
    tools: Sequence[ToolSpec],
    settings: ContextSettings,
    token_ratio: float = 1.0,
    pending: Sequence[RememberFact] = (),
    world: Sequence[Salient] = (),
    conversation: str = "",
    traits: Sequence[str] = (),
    gists: Sequence[str] = (),
    history_from: int = 0,
    embedding: Future[list[bytes]] | None = None,
) -> TurnContext:
    """Gather and fit the context of a turn on `channel` answering `text`. `pending` are facts
    this turn already knows (the name the person just gave) before they are stored; `world` the
    most salient signals with their salience, sharing the state section's budget;
    `conversation` where the conversation stands (topic, phase, confidence, situation), kept
    in the situation; `traits` the adaptive traits' lines (chalie/cognition/traits.py), in the
    situation too (learned from every message, they change more often than the identity);
    `gists` the DMN's unsent thoughts (drift gists), in the situation last; `history_from`
    the transcript id the previous turn's history started at: the history keeps that start
    while it fits, and then drops its oldest lines a block at a time, so that the prompt's
    beginning stays the same for many turns (a model server's prefix cache reuses it).
    `embedding`: `text`'s, begun earlier (Recall.embed_meanwhile); else it begins now."""

    def tokens(s: str) -> int:
        return max(1, round(estimate_tokens(s) * token_ratio))

    f = prompts.fragment
    embedding = embedding or recall.embed_meanwhile(text)  # runs while the rest is read
    checkpoint = queries.latest_checkpoint(conn, channel)
    upto = queries.last_transcript_id(conn, channel)
    cap = 2 * settings.history_turns
    block = history_block(cap)
    raw_history = queries.recent_transcript(
        conn, channel, cap + block, after_id=checkpoint.upto_transcript_id if checkpoint else 0,
    )
    redact = Redactor(mq.forgotten(conn))
    people = _identity(mq.identity_items(conn), pending)
    identity_pieces = [Piece(system, tokens(system), PINNED)]
    for n, item in enumerate(people):
        line = _identity_line(prompts, item)
        pinned = item.key == NAME_KEY
        identity_pieces.append(Piece(line, tokens(line), PINNED if pinned else len(people) - n))
    current_state, situation, world_pieces = _state_pieces(
        prompts, redact, tokens, checkpoint=checkpoint, conversation=conversation, traits=traits,
        gists=gists, world=world)
    state_pieces = [p for p in (current_state, situation) if p is not None] + world_pieces
    tool_pieces: list[Piece[object]] = [
        Piece(t, tokens(_encode([t.name, t.description, t.parameters]).decode()), 0.0)
        for t in tools
    ]
    history_pieces: list[Piece[HistoryLine]] = []
    for said in raw_history:
        shown = msgspec.structs.replace(said, text=redact(said.text, said.created_at)) \
            if redact else said
        history_pieces.append(Piece(shown, tokens(shown.text) + 2, 0.0))
    budgets = assembly.budgets(settings.context_window, settings.reply_reserve, settings.shares)
    fitted = assembly.assemble(budgets, identity=identity_pieces, state=state_pieces,
                               tools=tool_pieces)
    history = assembly.history_blocks(history_pieces, fitted.history_budget, cap=cap,
                                      block=block, start_id=history_from,
                                      id_of=lambda line: line.id)
    # What the history leaves of its budget goes to memory: the history's start does not
    # depend on what recall finds, and a short conversation leaves room to recall more. Only
    # what a history trimmed line by line would leave: the room that block trimming keeps free
    # for the coming turns is not lent, or memory (which changes every turn) would grow by it
    # and the share of the prompt a cache can reuse shrink.
    memory_budget = budgets.memory + max(0, fitted.history_budget - assembly.used(
        assembly.newest(history_pieces, cap, fitted.history_budget)))
    try:
        found = recall.recall(
            conn, text, min(settings.recall_k, memory_budget // MEMORY_ITEM_TOKENS),
            before_transcript_id=history[0].value.id if history else None,
            exclude={i.mkey for i in people}, embedding=embedding,
        )
    except Exception as e:  # a bug in recall must cost the turn its memory, not its answer
        log.exception("recall_failed")
        found = Recalled((), degraded=f"recall failed: {e!r}")
    headings: dict[str, str] = {}  # each day's heading, rendered once
    # A recalled fact shows what it replaced ("home: Porto (since ...; before: Lisbon)").
    replaced = fact_rows.replaced(conn, [h.item.id for h in found.hits
                                         if h.item.kind == "knowledge"])
    kept, memory_used = _fill(prompts, redact, tokens, found.hits, memory_budget,
                                headings=headings, replaced=replaced)
    best = sorted((h for h, _ in kept if h.beside is None), key=lambda h: -h.score)[:REINFORCED]
    chosen = {hit.item.mkey for hit in best}
    lines = tuple(MemoryLine(_heading(prompts, headings, hit.item.created_at), line, hit.score,
                             hit.item.mkey in chosen) for hit, line in kept)
    person = "\n".join(p.value for p in fitted.identity[1:]) or f("identity_empty")
    kept_world = [p.value for p in fitted.state if p is not current_state and p is not situation]
    spoken = [p.value for p in history]
    items = [*people, *(hit.item for hit, _ in kept)]
    return TurnContext(
        person_texts=(*(h.text for h in spoken if h.role == "user"),
                      *(i.text for i in items if i.role in ("user", None) and i.kind != "episode")),
        program_texts=(*(h.text for h in spoken if h.role == "program"),
                       *(i.text for i in items if i.role == "program"),
                       *(" ".join((s.signal.source, s.signal.topic or "", s.signal.content))
                         for s in world)),
        identity=person,
        state=current_state.value if current_state is not None else "",
        situation=situation.value if situation is not None else "",
        world=_world_section(prompts, kept_world),
        memory_lines=lines,
        history=tuple(spoken),
        tools=tuple(p.value for p in fitted.tools),  # type: ignore[misc]
        recalled=tuple(hit.item.mkey for hit in best),
        history_upto=upto,
        tokens={"identity": assembly.used(fitted.identity), "state": assembly.used(fitted.state),
                "memory": memory_used, "tools": assembly.used(fitted.tools),
                "history": assembly.used(history), "history_budget": fitted.history_budget,
                "memory_budget": memory_budget},
        degraded=found.degraded,
        vector=found.vector,
        recall_s=found.seconds,
        embed_wait_s=found.embed_wait_s,
        recalled_texts=tuple(hit.item.text for hit in best),
        worlds=len(kept_world),
        history_from=history[0].value.id if history else 0,
        memory_fill=min(1.0, memory_used / budgets.memory) if budgets.memory > 0 else 0.0,
    )


def _fill(prompts: Prompts, redact: Redactor, tokens: Callable[[str], int],
          hits: Sequence[Hit], budget: int, *, headings: dict[str, str],
          replaced: dict[int, list[Before]]) -> tuple[list[tuple[Hit, str]], int]:
    """The memory section's items and the tokens they use: the most relevant while the budget
    lasts (one that does not fit is skipped for a smaller one; a text already kept is not
    kept again), then in the order they were said, so that a recalled line sits beside its
    neighbours and dates read forwards. Each day's heading is rendered into `headings` once,
    for the caller to reuse."""
    kept: list[tuple[Hit, str]] = []
    memory_used = 0
    said: set[tuple[str | None, str]] = set()  # the same words again add nothing
    days: set[str] = set()  # each day shown once, above its items
    for hit in hits:
        if budget - memory_used < MEMORY_ITEM_TOKENS // 2:
            break
        words = (hit.item.role, " ".join(hit.item.text.casefold().split()))
        if words in said:
            continue
        said.add(words)
        line = redact(_memory_line(prompts, hit, replaced), hit.item.created_at)
        day = _day(hit.item.created_at)
        cost = tokens(line) + (0 if day in days
                               else tokens(_heading(prompts, headings, hit.item.created_at)))
        if memory_used + cost <= budget:
            kept.append((hit, line))
            days.add(day)
            memory_used += cost
    kept.sort(key=lambda hl: (hl[0].item.created_at, hl[0].item.mkey))
    return kept, memory_used


def _state_pieces(prompts: Prompts, redact: Redactor, tokens: Callable[[str], int], *,
                  checkpoint: Checkpoint | None, conversation: str, traits: Sequence[str],
                  gists: Sequence[str], world: Sequence[Salient],
                  ) -> tuple[Piece[str] | None, Piece[str] | None, list[Piece[str]]]:
    """The state section's pieces: the Current State (the checkpoint: it changes only when the
    channel is compacted), the situation (where the conversation stands and the drift gists:
    new every turn), both pinned, and the world state's signals, by salience."""
    current_state = situation = None
    if checkpoint:
        text = redact(checkpoint.text, checkpoint.created_at)
        current_state = Piece(text, tokens(text), PINNED)
    situation_text = conversation
    if traits:
        learned = "\n".join(prompts.fragment("identity_adaptive", trait=t) for t in traits)
        situation_text = f"{situation_text}\n\n{learned}" if situation_text else learned
    if gists:
        drift = prompts.fragment("drift_gists",
                                 items="\n".join(f"- {redact(g)}" for g in gists))
        situation_text = f"{situation_text}\n\n{drift}" if situation_text else drift
    if situation_text:
        situation = Piece(situation_text, tokens(situation_text), PINNED)
    signals = []
    for salient in world:
        line = _world_line(prompts, salient)
        signals.append(Piece(line, tokens(line), salient.salience))
    return current_state, situation, signals


def history_block(cap: int) -> int:
    """Lines the history drops at once when it must drop some: a quarter of its cap."""
    return max(2, cap // 4)


def identity_text(conn: apsw.Connection, prompts: Prompts) -> str:
    """Who the person is (name, traits, preferences), as the identity section shows it, for a
    prompt with no budget to fit (the DMN's)."""
    redact = Redactor(mq.forgotten(conn))
    lines = [redact(_identity_line(prompts, item), item.created_at)
             for item in _identity(mq.identity_items(conn), ())]
    return "\n".join(lines)


def world_text(prompts: Prompts, world: Sequence[Salient]) -> str:
    """The fenced world-state section for these signals; "" when there are none."""
    return _world_section(prompts, [_world_line(prompts, s) for s in world])


def _world_section(prompts: Prompts, lines: Sequence[str]) -> str:
    """Signals' lines as the world-state section shows them: one fence of data, naming where
    it came from; "" when there are none."""
    if not lines:
        return ""
    return prompts.fragment("world_state", items=prompts.fence(
        prompts.fragment("fence_signals"), "\n".join(lines)))


def _identity(stored: list[Item], pending: Sequence[RememberFact]) -> list[Item]:
    """Stored traits and preferences, with this turn's own (not yet stored) in front."""
    fresh = [Item(mkey(Kind.KNOWLEDGE, 0), "knowledge", 0, knowledge_text(p.key, p.value),
                  0.0, key=p.key, knowledge_kind=p.kind)
             for p in pending if p.kind in ("trait", "preference")]
    keys = {i.key for i in fresh}
    return fresh + [i for i in stored if i.key not in keys]


def _identity_line(prompts: Prompts, item: Item) -> str:
    key = item.key or ""
    value = item.text[len(key) + 2:] if item.text.startswith(f"{key}: ") else item.text
    if key == NAME_KEY:
        return prompts.fragment("identity_name", name=value)
    return prompts.fragment("identity_item", key=key, value=value)


def _memory_line(prompts: Prompts, hit: Hit,
                 replaced: dict[int, list[Before]] | None = None) -> str:
    """One recalled item, without its day (the section shows each day once, above its items);
    a fact with the values it replaced."""
    item = hit.item
    before = tuple(replaced.get(item.id, ())) if replaced and item.kind == "knowledge" else ()
    return _rendered(prompts, item, before)


@functools.lru_cache(maxsize=RENDERED_KEPT)
def _rendered(prompts: Prompts, item: Item, before: tuple[Before, ...]) -> str:
    """`_memory_line`, made once for an item as long as it and the prompts stay the same: a
    turn shows a couple of hundred, mostly the ones the turn before showed."""
    text = " ".join(item.text.split())
    if len(text) > MEMORY_ITEM_CHARS:
        text = text[:MEMORY_ITEM_CHARS].rstrip() + "…"
    if before:
        text = updates.with_history(prompts, item.key or "", text, item.created_at, before)
    match item.kind:
        case "message" if item.role == "program":
            return prompts.fragment("recalled_program",
                                    text=prompts.message_of(item.speaker, text))
        case "message":
            name = "recalled_person" if item.role == "user" else "recalled_assistant"
        case "episode":
            name = "recalled_episode"
        case "knowledge":
            name = "recalled_fact"
    return prompts.fragment(name, text=text)


def _day(at: float) -> str:
    return _day_of(int(at // 86400))


def _heading(prompts: Prompts, headings: dict[str, str], at: float) -> str:
    """The heading of the day of `at` (made once a day in `headings`)."""
    day = _day(at)
    if (heading := headings.get(day)) is None:
        heading = headings[day] = prompts.fragment("recalled_day", date=day)
    return heading


@functools.lru_cache(maxsize=4096)
def _day_of(day: int) -> str:
    """The date (UTC) of a day counted from the epoch: a turn shows a hundred items or more."""
    return datetime.fromtimestamp(day * 86400, UTC).strftime("%Y-%m-%d")


WORLD_CONTENT_CHARS = 500


def _world_line(prompts: Prompts, salient: Salient) -> str:
    """One signal as data: on one line (so it cannot start one of its own), cut short; the
    fence around the section defuses anything that would close it."""
    s = salient.signal

    def clean(text: str, limit: int) -> str:
        text = " ".join(text.split())
        return text if len(text) <= limit else text[:limit].rstrip() + "…"

    topic = prompts.fragment("world_topic", topic=clean(s.topic, 80)) if s.topic else ""
    return prompts.fragment(
        "world_signal", signal_type=s.signal_type, source=clean(s.source, 80),
        age=_age(salient.age_s), salience=f"{salient.salience:.2f}", topic=topic,
        content=clean(s.content, WORLD_CONTENT_CHARS),
    )


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{max(0, round(seconds))}s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)}min"
    if seconds < 48 * 3600:
        return f"{round(seconds / 3600)}h"
    return f"{round(seconds / 86400)}d"
