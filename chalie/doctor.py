"""`chalie doctor`: whether the configured server could work, one line per check.

A person runs it after editing the config, or when something is wrong, so each line says what
was checked and, when it failed, what is wrong and which setting to change:

    ok    <what>
    warn  <what>: <problem>; <setting to change>
    FAIL  <what>: <problem>; <setting to change>

The checks, in order: the configuration (and the prompt files), the data directory, SQLite and
sqlite-vec (and the database, if there is one), the embedder, every job's model and fallback
(chalie/doctor_models.py), the MCP servers, the paired interfaces, and the ways to reach the
person away from the page: the VAPID keys, the Apprise URLs, the Telegram bot's token
(chalie/doctor_away.py). FAIL means the server could not work: the data directory, SQLite and
sqlite-vec, the database, the prompts, no working model for the primary job, or a VAPID key
file it cannot use. The exit code is then 1; warnings alone leave it 0.

Nothing here writes to the store: the database is opened read-only, and the data directory is
not created. Configured secrets (API keys, MCP servers' header and environment values, the
Telegram bot's token) are blanked out of every line, whatever an error message quotes.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

import anyio
import apsw
import httpx
from mcp import ClientSession, types

from chalie import doctor_away
from chalie.config import JOBS, Config, McpConfig, McpServerConfig, MemoryConfig, StoreConfig
from chalie.doctor_models import Line, check_models
from chalie.errors import ConfigError, EmbedError, PromptError, StoreError
from chalie.interfaces.client import InterfaceClient, base_url
from chalie.interfaces.errors import InterfaceError
from chalie.mcp.connection import CLIENT_INFO, MAX_PAGES, describe
from chalie.mcp.transport import WatchedStream, open_transport
from chalie.memory import minilm_weights
from chalie.memory.embedders import Embedder, build_embedder, dimension
from chalie.memory.minilm import MiniLmEmbedder
from chalie.prompts import Prompts
from chalie.store import db, interface_rows

_LEVELS = {"ok": "ok    ", "warn": "warn  ", "FAIL": "FAIL  "}
_HIDDEN = "***"
_SECRET_MIN = 8  # characters
_EMBED_TEXT = "chalie doctor"  # embedded once to see the embedder work; never shown to a model


class Report:
    """Prints the lines as they come, with secrets blanked out, and counts them."""

    def __init__(self, out: TextIO, secrets: Iterable[str]) -> None:
        self._out = out
        # A value shorter than a key (an MCP server's DEBUG=1) is no secret, and blanking it
        # would blank pieces of ordinary words.
        self._secrets = sorted({s for s in secrets if len(s) >= _SECRET_MIN}, key=len,
                               reverse=True)
        self.warnings = 0
        self.failures = 0

    def line(self, line: Line) -> None:
        text = line.what if not line.problem else f"{line.what}: {line.problem}"
        for secret in self._secrets:
            text = text.replace(secret, _HIDDEN)
        self.warnings += line.level == "warn"
        self.failures += line.level == "FAIL"
        print(_LEVELS[line.level] + text, file=self._out, flush=True)

    def ok(self, what: str) -> None:
        self.line(Line("ok", what))

    def warn(self, what: str, problem: str) -> None:
        self.line(Line("warn", what, problem))

    def fail(self, what: str, problem: str) -> None:
        self.line(Line("FAIL", what, problem))

    def summary(self) -> None:
        w, f = self.warnings, self.failures
        print(f"doctor: {w} warning{'' if w == 1 else 's'}, {f} failure{'' if f == 1 else 's'}",
              file=self._out, flush=True)


def run(config: Config, source: Path | None, out: TextIO = sys.stdout) -> int:
    """Every check, in order; 1 when the server could not work, else 0."""
    report = Report(out, _secrets(config))
    where = f"{source} over the shipped defaults" if source else "the shipped defaults"
    try:
        prompts = Prompts.load()
    except PromptError as e:
        report.fail(f"configuration: {where}", f"{e}; restore the prompts/ directory")
        prompts = None
    else:
        report.ok(f"configuration: {where}, and the prompt files")
    _data_directory(report, config.store)
    _free_space(report, config.store)
    _sqlite(report, config.store)
    _embedder(report, config)
    if prompts is not None:
        for line in check_models(config.llm, prompts):
            report.line(line)
    _mcp(report, config.mcp)
    _interfaces(report, config)
    doctor_away.check(report, config)
    report.summary()
    return 1 if report.failures else 0


def _secrets(config: Config) -> list[str]:
    llm = config.llm
    keys = [llm.api_key, config.memory.embed_api_key]
    for job in JOBS:
        for fallback in (False, True):
            settings = llm.job(job, fallback=fallback)
            if settings is not None:
                keys.append(settings.api_key)
    for server in config.mcp.servers:
        keys += [*server.headers.values(), *server.env.values()]
    keys.append(config.telegram.token)
    return keys


# --- the store ------------------------------------------------------------------------------------

def _data_directory(report: Report, store: StoreConfig) -> None:
    directory = Path(store.path).absolute()
    what = f"data directory: {directory}"
    change = "set store.path to a directory this user can write to"
    if directory.exists():
        database = db.db_path(directory)
        if not directory.is_dir():
            report.fail(what, f"is not a directory; {change}")
        elif not os.access(directory, os.W_OK | os.X_OK):
            report.fail(what, f"is not writable by this user; {change}")
        elif database.exists() and not os.access(database, os.R_OK | os.W_OK):
            report.fail(what, f"{database.name} is not writable by this user; {change}")
        else:
            report.ok(f"{what} (writable)")
        return
    parent = next(p for p in directory.parents if p.exists())
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        report.fail(what, f"does not exist and cannot be created ({parent} is not writable); "
                    f"{change}")
    else:
        report.ok(f"{what} (does not exist yet; serve creates it)")


def _free_space(report: Report, store: StoreConfig) -> None:
    """Free space where the store lives (or will): a warning under store.min_free_mb, a failure
    when nothing is left (no turn could be stored)."""
    directory = Path(store.path).absolute()
    existing = next((p for p in (directory, *directory.parents) if p.exists()), directory)
    try:
        st = os.statvfs(existing)
    except OSError as e:
        report.warn(f"free space at {existing}", f"cannot be read ({e})")
        return
    mib = st.f_bavail * st.f_frsize / 2**20
    what = f"free space at {existing}: {mib:,.0f} MiB"
    if mib < 1:
        report.fail(what, "the disk is full: no turn could be stored; free some space")
    elif mib < store.min_free_mb:
        report.warn(what, f"under store.min_free_mb ({store.min_free_mb:g}); free some space "
                    "before the disk fills")
    else:
        report.ok(what)


def _sqlite(report: Report, store: StoreConfig) -> None:
    """SQLite and sqlite-vec in memory, then the database file read-only, if there is one."""
    sqlite = f"SQLite {apsw.sqlite_lib_version()}"
    try:
        conn = db.connect(Path(":memory:"), busy_timeout_ms=store.busy_timeout_ms)
        try:
            vec = str(conn.execute("SELECT vec_version()").fetchall()[0][0])
        finally:
            conn.close()
    except (StoreError, apsw.Error) as e:
        report.fail(f"{sqlite} and sqlite-vec", f"sqlite-vec does not work ({e}); reinstall "
                    "Chalie's dependencies (pip install --force-reinstall sqlite-vec apsw)")
        return
    what = f"{sqlite}, sqlite-vec {vec}"
    path = db.db_path(store.path).absolute()
    if not path.is_file():
        report.ok(f"{what}; no database yet at {path} (serve creates it)")
        return
    change = "restore a backup (chalie restore FILE), or set store.path to another directory"
    try:
        conn = db.connect(path, busy_timeout_ms=store.busy_timeout_ms, readonly=True)
        try:
            damage = [str(r[0]) for r in conn.execute("PRAGMA quick_check") if r[0] != "ok"]
            found = conn.execute("PRAGMA user_version").fetchall()[0][0]
        finally:
            conn.close()
    except (StoreError, apsw.Error) as e:
        report.fail(f"{what}; database {path}", f"cannot be read ({e}); {change}")
        return
    version = found if isinstance(found, int) else 0
    code = db.latest_version()  # the version serve migrates to
    if damage:
        report.fail(f"{what}; database {path}",
                    f"PRAGMA quick_check found damage ({'; '.join(damage[:3])}); {change}")
    elif version > code:
        report.fail(f"{what}; database {path}",
                    f"its schema version {version} is newer than this Chalie's ({code}): a "
                    f"newer Chalie wrote it; upgrade Chalie, or set store.path to another "
                    "directory")
    elif version < code:
        report.ok(f"{what}; database {path} (intact, schema version {version}; serve "
                  f"migrates it to {code})")
    else:
        report.ok(f"{what}; database {path} (intact, schema version {version})")


# --- the embedder -------------------------------------------------------------------------------

def _embedder(report: Report, config: Config) -> None:
    memory = config.memory
    what = f"embedder: {memory.embedder}"
    meanwhile = "recall falls back to full-text search meanwhile"
    try:
        models = Path(config.store.path) / "models"
        embedder = (_minilm(report, memory, models) if memory.embedder == "minilm"
                    else build_embedder(memory, config.llm, models_dir=models))
    except ConfigError as e:
        report.warn(what, f"{e.problem}; set {e.key} ({meanwhile})")
        return
    if embedder is None:
        return
    what = f"{what} ({embedder.space}; weights: {embedder.origin})"
    try:
        vectors = embedder.embed([_EMBED_TEXT], timeout_s=memory.embed_timeout_s)
    except EmbedError as e:
        change = ("memory.embed_base_url and memory.embed_model" if memory.embedder == "openai"
                  else "memory.embedder")
        report.warn(what, f"{e}; set {change} ({meanwhile})")
        return
    finally:
        embedder.close()
    report.ok(f"{what}, {dimension(vectors[0])} dimensions")


def _minilm(report: Report, memory: MemoryConfig, models_dir: Path) -> Embedder | None:
    """The "minilm" embedder when its ONNX file is built; else the line about where its weights
    would come from (doctor builds and fetches nothing) and None."""
    what = "embedder: minilm"
    try:
        weights = minilm_weights.resolve(memory.embed_model_path, memory.embed_weights_url,
                                         models_dir, int8=memory.embed_precision == "int8",
                                         prepare=False)
    except EmbedError as e:
        report.warn(what, f"no weights, so hashed (lexical) vectors stand in: {e}")
        return None
    if not weights.ready:
        report.ok(f"{what} (weights: {weights.origin})")
        return None
    try:
        return MiniLmEmbedder(weights, threads=memory.embed_threads)
    except EmbedError as e:
        report.warn(what, f"{e}; hashed (lexical) vectors stand in; delete {weights.onnx} to "
                    "have it built again, or set memory.embed_model_path")
        return None


# --- MCP servers ----------------------------------------------------------------------------------

def _mcp(report: Report, mcp: McpConfig) -> None:
    if not mcp.servers:
        report.ok("MCP servers: none configured")
        return
    for n, server in enumerate(mcp.servers):
        what = f"MCP server {server.name}: {_shown_address(server)}"
        try:
            count = asyncio.run(_list_tools(server, mcp))
        except Exception as e:  # whatever the SDK or the server raises: the server is not usable
            report.warn(what, f"{describe(e)}; check mcp.servers[{n}] (its tools are not "
                        "offered until it answers)")
        else:
            report.ok(f"{what} ({count} tool{'' if count == 1 else 's'})")


def _shown_address(server: McpServerConfig) -> str:
    """The command, or the URL without what may hold a secret (user info, query)."""
    if server.command:
        return " ".join((server.command, *server.args))
    parts = urlsplit(server.url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (
        f":{parts.port}" if parts.port else "") + parts.path


async def _list_tools(server: McpServerConfig, mcp: McpConfig) -> int:
    """Start or reach the server as the server would (chalie/mcp/transport.py), initialize a
    session and list its tools, all within connect_timeout_s."""
    with anyio.fail_after(mcp.connect_timeout_s):
        async with AsyncExitStack() as stack:
            read, write = await open_transport(server, stack,
                                               connect_timeout_s=mcp.connect_timeout_s,
                                               call_timeout_s=mcp.call_timeout_s)
            # Wrapped as the server wraps it (end of stream is not watched here: one request).
            session = await stack.enter_async_context(ClientSession(
                WatchedStream(read, _ignore_end), write, client_info=CLIENT_INFO))
            await session.initialize()
            count, cursor = 0, None
            for _ in range(MAX_PAGES):
                params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
                page = await session.list_tools(params=params)
                count += len(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return count


def _ignore_end() -> None:
    pass


# --- paired interfaces ----------------------------------------------------------------------------

def _interfaces(report: Report, config: Config) -> None:
    path = db.db_path(config.store.path)
    if not path.is_file():
        report.ok("paired interfaces: none (no database yet)")
        return
    try:
        conn = db.connect(path, busy_timeout_ms=config.store.busy_timeout_ms, readonly=True)
        try:
            rows = interface_rows.interfaces(conn)
        finally:
            conn.close()
    except (StoreError, apsw.Error) as e:
        report.warn("paired interfaces", f"not checked: the database cannot be read ({e})")
        return
    if not rows:
        report.ok("paired interfaces: none paired")
        return
    settings = config.interfaces
    with httpx.Client(follow_redirects=False, trust_env=False) as http:
        client = InterfaceClient(http, health_timeout_s=settings.health_timeout_s,
                                 connect_timeout_s=settings.connect_timeout_s,
                                 execute_timeout_s=settings.execute_timeout_s,
                                 max_response_bytes=settings.max_response_bytes)
        for row in rows:
            what = f"interface {row.name} at {base_url(row.host, row.port)}"
            try:
                health = client.health(row.host, row.port)
            except InterfaceError as e:
                report.warn(what, f"{e}; is the program running? Its tools are offline until "
                            "/health answers (within interfaces.health_timeout_s); if it is "
                            f"gone for good, unpair it: DELETE /api/interfaces/{row.id}")
            else:
                report.ok(f"{what} (healthy, version {health.version})")
