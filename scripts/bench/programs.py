"""Programs people already use: what a turn costs through /v1/chat/completions and MCP's
ask_chalie beside /ws, what MCP's memory tools take, and the memory the MCP server adds.

One server with a stub LLM that answers at once ("stub answer"), one scoped token. Interleaved
rounds: a /ws turn, a chat completion (not streamed), one streamed, an MCP ask_chalie, an MCP
search_memory and list_facts, each timed from the client (send to whole answer). The server's
resident memory is read before anything touches /mcp, once the MCP session is open (the SDK is
imported on the first /mcp request) and after the rounds. Each chat completion carries a new
conversation, so every one runs a turn.

    .venv/bin/python scripts/bench/programs.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
import httpx
import httpx2
from _common import emit, log_problems, progress, rss_mib, summary
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openai import OpenAI

from tests.integration.harness import ServerProcess, StubLlm

_common.quiet_logging()
SCOPES = ["memory:read", "memory:write", "chat", "signals"]


def ms(seconds: list[float]) -> dict[str, Any]:
    return summary([s * 1000 for s in seconds], digits=2)


async def mcp_rounds(url: str, token: str, rounds: int, *, ws: Any, sdk: OpenAI,
                     times: dict[str, list[float]], pid: int) -> tuple[float, float | None]:
    """All rounds inside one MCP session; returns the seconds the session took to open and
    the server's resident memory once it was open (the SDK imported)."""
    t0 = time.perf_counter()
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=60) as http, \
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        opened = time.perf_counter() - t0
        rss_open = rss_mib(pid)
        await session.call_tool("remember", {"key": "favourite colour", "value": "teal"})
        for n in range(rounds):
            if n % 20 == 0:
                progress(f"round {n}/{rounds}")
            timed(times, "ws_turn", ws.turn, f"ws turn {n}")
            timed(times, "openai_chat", sdk.chat.completions.create, model="chalie",
                  messages=[{"role": "user", "content": f"openai turn {n}"}])
            timed(times, "openai_stream", lambda m: list(sdk.chat.completions.create(
                model="chalie", messages=m, stream=True)),
                  [{"role": "user", "content": f"stream turn {n}"}])
            for tool, args in (("ask_chalie", {"question": f"mcp turn {n}"}),
                               ("search_memory", {"query": "favourite colour"}),
                               ("list_facts", {})):
                start = time.perf_counter()
                result = await session.call_tool(tool, args)
                times[f"mcp_{tool}"].append(time.perf_counter() - start)
                assert not result.is_error, (tool, result)
    return opened, rss_open


def timed(times: dict[str, list[float]], name: str, work: Any, *args: Any,
          **kwargs: Any) -> None:
    start = time.perf_counter()
    work(*args, **kwargs)
    times[name].append(time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    stub = StubLlm()
    workdir = Path(tempfile.mkdtemp(prefix="chalie-bench-programs-"))
    server = ServerProcess(workdir, stub, log={"level": "info"},
                           server={"rest_rate_per_min": 0}).start()
    try:
        cookie = server.login()
        made = httpx.post(f"{server.url}/api/tokens", cookies={"chalie_session": cookie},
                          json={"name": "bench", "scopes": SCOPES}, timeout=30)
        made.raise_for_status()
        token = made.json()["token"]
        ws = server.connect(cookie)
        for n in range(5):  # warm-up: the first turns pay for imports and caches
            ws.turn(f"warm-up {n}")
        assert server.proc is not None
        rss_before = rss_mib(server.proc.pid)
        times: dict[str, list[float]] = {k: [] for k in (
            "ws_turn", "openai_chat", "openai_stream", "mcp_ask_chalie", "mcp_search_memory",
            "mcp_list_facts")}
        with OpenAI(base_url=f"{server.url}/v1", api_key=token, max_retries=0,
                    timeout=60) as sdk:
            opened, rss_open = asyncio.run(mcp_rounds(
                server.url, token, args.rounds, ws=ws, sdk=sdk, times=times,
                pid=server.proc.pid))
        rss_after = rss_mib(server.proc.pid)
        emit("programs", {"rounds": args.rounds},
             **{f"{k}_ms": ms(v) for k, v in times.items()},
             mcp_first_session_s=round(opened, 3),
             rss_mib={"before_mcp": rss_before, "mcp_open": rss_open, "after": rss_after},
             problems=log_problems(server.log_events()))
    finally:
        server.kill()
        stub.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
