"""`chalie serve [--config FILE]`: run the server until SIGINT/SIGTERM; SIGHUP reloads the config
(what can change while running; chalie/reload.py says which keys).
`chalie snapshot TURN_ID [--config FILE] [--json]`: print the LLM requests of one turn.
`chalie doctor [--config FILE]`: check that the configured server could work, a line a check.

serve exits 0 after a clean stop, 1 when the actor tree gave up, 2 for a configuration error or
a damaged database (one line names the file, the damage and the newest backup to restore; a
quick check of the file's pages runs before anything opens it for writing).
snapshot exits 0 when it printed the turn, 1 when the turn or the database is not there (or
cannot be read), 2 for a configuration error. It opens the database read-only, so it works
while the server runs.
doctor exits 0 when the server could work (warnings allowed), 1 when it could not, 2 for a
configuration error; it writes nothing to the store (chalie/doctor.py).
`chalie backup FILE`, `chalie restore FILE`, `chalie export FILE`, `chalie import FILE` (each
with --config FILE): copy the store while the server runs, put a copy back, write the memory as
JSON Lines, read it into a new store (chalie/cli_store.py); 0 done, 1 failed, 2 config error.
`chalie passwd [--config FILE]`: set a new login password (typed twice, or one line on stdin)
and end every login session, also while the server runs (chalie/cli_auth.py); 0 done, 1
refused (too short, or auth.password is set) or failed, 2 config error.
`chalie setup [--config FILE]`: choose the model in a terminal (the browser's setup questions),
check it live, save it to settings.toml; `--non-interactive` and flags for scripts
(chalie/cli_setup.py); 0 saved, 1 a check FAILed and nothing saved, 2 bad flags or a locked key.
`chalie mcp [--url URL] [--token-file FILE]`: Chalie's MCP server over stdio, relayed to the
running server's /mcp with an API token (chalie/cli_mcp.py); it never opens the store. 0 when
its client closes, 1 the server cannot be reached or refused, 2 no token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import msgspec
import structlog

from chalie import cli_auth, cli_setup, cli_store, logs, settings
from chalie.actors.housekeeper import backup_directory
from chalie.config import Config
from chalie.edge.rest_turns import not_kept, prompts_document
from chalie.errors import ChalieError, ConfigError
from chalie.memory import heap
from chalie.server import Server
from chalie.store import backup as backups
from chalie.store import db


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chalie", description="Chalie assistant server")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server")
    serve.add_argument("--config", type=Path, help="TOML file merged over config/chalie.toml")
    snapshot = sub.add_parser("snapshot", help="print the LLM requests of one turn, as sent")
    snapshot.add_argument("turn_id", help="the turn (or background job) id")
    snapshot.add_argument("--config", type=Path, help="TOML file merged over config/chalie.toml")
    snapshot.add_argument("--json", action="store_true",
                          help="print GET /api/turns/TURN_ID/prompts's JSON instead")
    doctor_cmd = sub.add_parser("doctor", help="check that the configured server could work")
    doctor_cmd.add_argument("--config", type=Path,
                            help="TOML file merged over config/chalie.toml")
    cli_store.register(sub)
    cli_auth.register(sub)
    cli_setup.register(sub)
    mcp_cmd = sub.add_parser("mcp", help="Chalie's MCP server over stdio, relayed to the "
                                         "running server's /mcp with an API token")
    mcp_cmd.add_argument("--url", help="the server's /mcp URL (default: from the config's "
                                       "server.host and server.port)")
    mcp_cmd.add_argument("--token-file", type=Path,
                         help="a file holding the API token (default: $CHALIE_TOKEN)")
    mcp_cmd.add_argument("--config", type=Path, help="TOML file merged over config/chalie.toml")
    args = parser.parse_args(argv)
    try:
        config, _ = settings.load(args.config, os.environ)
    except ConfigError as e:
        print(f"chalie: {e}", file=sys.stderr)
        return 2
    if args.command == "snapshot":
        return _snapshot(config, args.turn_id, as_json=args.json)
    if args.command == "setup":
        logs.configure(config.log.format, "error", stream=sys.stderr)
        return cli_setup.run(args, env=os.environ)
    if args.command == "passwd":
        logs.configure(config.log.format, "error", stream=sys.stderr)
        return cli_auth.run(config, args.config, env=os.environ)
    if args.command in cli_store.COMMANDS:
        logs.configure(config.log.format, "error", stream=sys.stderr)
        return cli_store.run(args.command, args.file, config)
    if args.command == "mcp":
        # stdout is the MCP stream: the log goes to stderr, errors only. Imported here: it
        # loads the MCP SDK, which `serve` loads only when /mcp is used.
        logs.configure(config.log.format, "error", stream=sys.stderr)
        from chalie import cli_mcp  # noqa: PLC0415

        return cli_mcp.run(args, config, env=os.environ)
    if args.command == "doctor":
        # Its lines are the output; the log (what providers and MCP say on the way) is not.
        logs.configure(config.log.format, "error", stream=sys.stderr)
        # Imported here: it loads the MCP SDK (35 MiB), which `serve` loads only when
        # [[mcp.servers]] names a server.
        from chalie import doctor  # noqa: PLC0415

        return doctor.run(config, args.config)
    logs.configure(config.log.format, config.log.level)
    _raise_open_files_limit()
    heap.limit_arenas()  # before the server starts its threads
    db_file = db.db_path(config.store.path)
    problem = backups.damage(db_file)
    if problem is None:
        try:
            return asyncio.run(_serve(config, args.config))
        except ChalieError as e:
            print(f"chalie: {e}", file=sys.stderr)
            return 1
        except (apsw.CorruptError, apsw.NotADBError) as e:  # found past the quick check
            problem = str(e)
    print("chalie: " + backups.damage_line(db_file, problem, backup_directory(config.store)),
          file=sys.stderr)
    return 2


def _snapshot(config: Config, turn_id: str, *, as_json: bool) -> int:
    path = db.db_path(config.store.path)
    if not path.is_file():
        print(f"chalie: no database at {path} (store.path = {config.store.path!r})",
              file=sys.stderr)
        return 1
    try:
        conn = db.connect(path, busy_timeout_ms=config.store.busy_timeout_ms, readonly=True)
        try:
            document = prompts_document(conn, turn_id)
        finally:
            conn.close()
    except (ChalieError, apsw.Error) as e:
        print(f"chalie: cannot read {path}: {e}", file=sys.stderr)
        return 1
    if document is None:
        print(f"chalie: {not_kept(turn_id, config.memory.snapshots_kept)}", file=sys.stderr)
        return 1
    if as_json:
        print(msgspec.json.encode(document).decode())
    else:
        print("\n\n".join(_readable(prompt) for prompt in document["prompts"]))
    return 0


def _readable(prompt: dict[str, Any]) -> str:
    """One LLM request as a person reads it: system, messages, tools, response format."""
    at = datetime.fromtimestamp(prompt["created_at"], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"== call {prompt['call']}: {prompt['purpose']}, {at} ==",
             "--- system ---", prompt["system"]]
    for message in prompt["messages"]:
        lines += [f"--- {message['role']} ---", message["content"]]
    lines.append("--- tools ---")
    lines += [f"{tool['name']}: {_first_line(tool['description'])}" for tool in prompt["tools"]]
    if not prompt["tools"]:
        lines.append("(none)")
    fmt = prompt["response_format"]
    if fmt is not None:
        schema = msgspec.json.format(msgspec.json.encode(fmt["schema"]), indent=2).decode()
        lines += [f"--- response format: {fmt['name']} ---", schema]
    return "\n".join(lines)


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else ""


def _raise_open_files_limit() -> None:
    """Each socket and each thread's read connection holds file descriptors; a server with many
    sessions needs more than the usual soft limit of 1024, so take what the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY
                                                        else 65536, hard))


def _say(text: str) -> None:
    """A line for the person on stdout, in one write: log lines from other threads go to the
    same stream, and print() writes the text and its newline separately, so one could land
    between them and both lines would be garbled."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _reload(server: Server, path: Path | None) -> None:
    """SIGHUP: read the config file and environment again and take what can change while
    running (chalie/reload.py); a config that does not load leaves the one in effect."""
    log = structlog.get_logger("chalie.cli")
    try:
        new, _ = settings.load(path, os.environ)
    except ConfigError as e:
        log.warning("reload_refused", key=e.key, problem=e.problem,
                    note="the server goes on with the config it has")
        return
    log_before = server.config.log
    try:
        applied, restart = server.reload(new)
    except ChalieError as e:  # a model that cannot be built: nothing was applied
        log.warning("reload_refused", problem=str(e),
                    note="the server goes on with the config it has")
        return
    if server.config.log != log_before:
        logs.configure(server.config.log.format, server.config.log.level)
    log.info("config_reloaded", applied=applied, needs_restart=restart)
    for key in restart:
        log.warning("reload_needs_restart", key=key,
                    note=f"{key} changed: takes effect after a restart")


def _browser_address(host: str, port: int) -> str:
    """Where a browser on this machine finds the server: a wildcard address is not one."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


async def _serve(config: Config, path: Path | None) -> int:
    log = structlog.get_logger("chalie.cli")
    server = Server(config, config_file=path, env=os.environ)
    # Before start(): once it listens, /health answers, and a SIGTERM from then on must stop
    # the server cleanly rather than kill it (and a SIGHUP reload it, not end it).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, _reload, server, path)
    await server.start()
    if server.generated_password:
        _say(f"chalie: generated login password: {server.generated_password}\n"
             "chalie: it is shown only this once; set auth.password to choose your own")
    log.info("listening", host=config.server.host, port=server.port, db=str(server.db_path),
             llm=config.llm.provider)
    address = _browser_address(config.server.host, server.port)
    _say(f"chalie: open {address} in a browser to chat ({address}brain: the dashboard)")
    stopped = asyncio.ensure_future(stop.wait())
    failed = asyncio.ensure_future(server.wait_failed())
    await asyncio.wait({stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if failed.done():
        log.critical("giving_up", reason=failed.result())
        code = 1
    for task in (stopped, failed):
        task.cancel()
    await server.stop()
    return code
