"""`chalie serve [--config FILE]`: run the server until SIGINT/SIGTERM.

Exit codes: 0 after a clean stop, 1 when the actor tree gave up, 2 for a configuration error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import sys
from pathlib import Path

import structlog

from chalie import logs
from chalie.config import Config, load_config
from chalie.errors import ChalieError, ConfigError
from chalie.server import Server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chalie", description="Chalie assistant server")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server")
    serve.add_argument("--config", type=Path, help="TOML file merged over config/chalie.toml")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, env=os.environ)
    except ConfigError as e:
        print(f"chalie: {e}", file=sys.stderr)
        return 2
    logs.configure(config.log.format, config.log.level)
    _raise_open_files_limit()
    try:
        return asyncio.run(_serve(config))
    except ChalieError as e:
        print(f"chalie: {e}", file=sys.stderr)
        return 1


def _raise_open_files_limit() -> None:
    """Each socket and each thread's read connection holds file descriptors; a server with many
    sessions needs more than the usual soft limit of 1024, so take what the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY
                                                        else 65536, hard))


async def _serve(config: Config) -> int:
    log = structlog.get_logger("chalie.cli")
    server = Server(config)
    await server.start()
    if server.generated_password:
        print(
            f"chalie: generated login password: {server.generated_password}\n"
            "chalie: it is shown only this once; set auth.password to choose your own",
            flush=True,
        )
    log.info("listening", host=config.server.host, port=server.port, db=str(server.db_path),
             llm=config.llm.provider)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
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
