"""Screenshots of the web pages for the documentation, made from the real pages.

The real server (`python -m chalie serve`) runs on a temporary data directory, its model the
stub OpenAI-compatible server of the integration tests (tests/integration/harness.py) on
127.0.0.1. It is filled as a person's use would fill it, through the API and /ws as a client
does: a short conversation whose turns call the memory and goal tools, the facts it left, the
goal run through its plan to its result, a scheduled prompt, a paired program with its signal,
an API token. Headless Chromium
(driven as tests/browser/conftest.py drives it) then opens each page in light and dark, at
desktop size (1280x800 CSS pixels) and at phone size (390x844, mobile viewport), and the images
are written as docs/images/<page>-<theme>-<device>.png:

    login      the login page
    chat       the chat (/), with the conversation
    setup      the chat page of a second server whose model cannot be reached: the setup card
    brain      the dashboard (/brain), from its top (desktop: a taller window, 1280x1600)
    settings   the dashboard's settings (/brain#settings)

Phone images are taken at one device pixel per CSS pixel: a page shows an image at its pixel
size, so a phone shot appears at the size of a phone beside the desktop ones, and each file
stays small.

Nothing waits a fixed time: each image is taken once what it must show is on the page (the
socket connected, the conversation replayed, each dashboard section filled). Only the stub model
takes its time, THINKING_S a chat answer, so that a turn's details show a time as a real turn's
would. A JavaScript error in a page's console, a section's error or an error in a server's log
fails the run, and the page as it was is kept in artifacts/screenshots/.

    scripts/screenshots                          # all 20 images into docs/images
    scripts/screenshots --only chat brain        # a subset of the pages
    scripts/screenshots --out /tmp/shots --theme dark --device phone
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `chalie` and the test harness import from this checkout
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

from tests.browser.conftest import (  # noqa: E402
    CHROMEDRIVER,
    CHROMIUM,
    SKIP_LINE,
    Console,
    connected,
    find,
    login,
    path_of,
    start_chrome,
    until,
    visible,
    wait_text,
)
from tests.integration.harness import (  # noqa: E402
    WAIT_S,
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    wait_for,
)
from tests.integration.stub_interface import StubInterface, capability, pair  # noqa: E402

PAGES = ("chat", "brain", "setup", "settings", "login")
THEMES = ("light", "dark")
DEVICES = ("desktop", "phone")
ORDER = ("login", "chat", "brain", "settings", "setup")  # the login page before logging in
OUT = ROOT / "docs" / "images"
FAILED = ROOT / "artifacts" / "screenshots"  # what a page showed when it did not get ready


SIZES = {"desktop": (1280, 800), "phone": (390, 844)}  # CSS pixels, one device pixel each
TALLER = {("brain", "desktop"): 1600}  # the dashboard's grid: more of it in one image


def size_of(page: str, device: str) -> tuple[int, int]:
    """The image's width and height in pixels."""
    width, height = SIZES[device]
    return width, TALLER.get((page, device), height)


# --- what the model says --------------------------------------------------------------------------

MODEL = "qwen2.5:7b-instruct"  # the name the settings show; the stub answers to any
THINKING_S = 0.6  # each chat call of the model takes this long, as a small local model's would
CLOSED = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there


@dataclass(frozen=True)
class Turn:
    """One exchange of the conversation: what the person says, the model's answer (after the
    tool `call` (name, arguments) when one is given), and how the encoder reads it."""

    ask: str
    answer: str
    gist: str
    intent: str
    call: tuple[str, dict[str, str]] | None = None
    facts: tuple[tuple[str, str, str], ...] = ()  # (key, value, kind) the encoder finds
    entities: tuple[str, ...] = ()


GOAL = "Find flights to Lisbon for a long weekend in May that leave after 9:00"
CONVERSATION = (
    Turn("I'm going to Lisbon for a long weekend in May. I'm vegetarian, by the way.",
         "Lisbon in May is lovely: warm, and before the summer crowds. I've noted that you're "
         "vegetarian, so I'll keep that in mind for food ideas.",
         gist="The person is planning a long weekend in Lisbon in May; they are vegetarian.",
         intent="share travel plans",
         call=("memory", {"action": "remember", "key": "diet", "value": "vegetarian"}),
         facts=(("trip", "long weekend in Lisbon in May", "fact"),),
         entities=("Lisbon", "May")),
    Turn("What should I see if I only have two days?",
         "Two days is enough for the best of it:\n\n"
         "**Day 1: the old town.** Alfama's lanes and the Castelo de São Jorge, tram 28 "
         "through Graça, sunset at the Miradouro da Senhora do Monte.\n\n"
         "**Day 2: Belém.** The Jerónimos Monastery, the tower, and pastéis de Belém (worth "
         "the queue).\n\n"
         "For dinner, *Ao 26* in Chiado has a fully vegetarian menu.",
         gist="Chalie suggested a two-day Lisbon itinerary: Alfama and the castle, then Belém.",
         intent="plan sightseeing", entities=("Alfama", "Belém", "Tram 28")),
    Turn("Great. Could you look for flights? Nothing that leaves before 9 in the morning.",
         "I've started looking in the background: flights to Lisbon for a long weekend in May, "
         "none leaving before 09:00. The result will come here.",
         gist="The person asked for flights to Lisbon that leave after 9 in the morning.",
         intent="find flights", call=("goal", {"action": "start", "goal": GOAL}),
         facts=(("flights", "no departures before 9:00", "preference"),),
         entities=("Lisbon",)),
)
SITUATION = ("Planning a long weekend in Lisbon in May: the sights are chosen, the flights are "
             "being looked for (none before 9:00).")
CONCEPTS = (
    {"name": "lisbon trip", "related": [{"name": "flights", "relation": "needs"},
                                         {"name": "belém", "relation": "includes"}]},
    {"name": "vegetarian food", "related": [{"name": "restaurants", "relation": "guides"}]},
)
PLAN = {"steps": [
    {"id": "s1", "description": "List the direct flights to Lisbon on Fridays in May",
     "depends_on": []},
    {"id": "s2", "description": "Keep the ones that leave after nine in the morning",
     "depends_on": ["s1"]},
    {"id": "s3", "description": "Compare their prices and baggage allowances for the person",
     "depends_on": ["s2"]},
], "confidence": 0.85}
STEPS = {
    "s1": "Direct flights on Fridays in May: 07:10, 10:25, 13:40 and 18:05.",
    "s2": "After 9:00: 10:25, 13:40 and 18:05.",
    "s3": "The 10:25 on Friday 15 May is the cheapest (EUR 89 with a cabin bag); the 13:40 is "
          "EUR 104 and the 18:05 is EUR 97.",
}
SCHEDULE = {"prompt": "Every Friday: what is still left to plan for the Lisbon trip?",
            "cron": "0 18 * * 5", "timezone": "Europe/Lisbon"}
FORECAST = capability("forecast", "The weather forecast for a place and a day", read_only=True,
                      place=("string", True), day=("string", False))
SIGNAL = {"signal_type": "weather", "content": "Lisbon: sunny and 24 °C all weekend",
          "activation_energy": 0.8}
_LINE = re.compile(r"^\[(\d+)\] (Person|You) \([^)]*\): (.*)$", re.MULTILINE)
_STEP = re.compile(r"^Step (\w+):", re.MULTILINE)


class Model(StubLlm):
    """The stub model, answering as a model would in the story the images tell: chat turns
    from its queue (each one queued just before its turn), and by what they ask the requests
    that come on their own, even while a turn runs: episode encoding, goal plans and steps,
    the critic."""

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        reply = self._reply(body)
        if not (body.get("response_format") or _STEP.search(prompt_of(body))):
            time.sleep(THINKING_S)  # a chat turn's time, as the turn's details show it
        return reply

    def _reply(self, body: dict[str, Any]) -> Reply:
        spec = body.get("response_format") or {}
        kind = (spec.get("json_schema") or {}).get("name")
        prompt = prompt_of(body)
        if kind == "episodes":
            return _answer(json.dumps(encoding(prompt)), 900, 180)
        if kind == "plan":
            return _answer(json.dumps(PLAN), 700, 90)
        if kind == "critique":
            return _answer(json.dumps({"verdict": "ok", "reason": "It does what was asked."}))
        if kind is None and "# This step" in prompt and (step := _STEP.search(prompt)):
            return _answer(STEPS.get(step.group(1), "Done."), 1500, 60)
        return super()._next_reply(body)


def prompt_of(body: dict[str, Any]) -> str:
    """The last message of a chat-completions request."""
    return str((body.get("messages") or [{}])[-1].get("content") or "")


def _answer(text: str, prompt_tokens: int = 400, completion_tokens: int = 40) -> Reply:
    return Reply(completion(text, prompt_tokens=prompt_tokens,
                            completion_tokens=completion_tokens))


def encoding(prompt: str) -> dict[str, Any]:
    """The encoder's answer for the window in `prompt`: an episode for each turn of the
    conversation it shows, the facts the person said on their own lines."""
    lines = [(int(n), who, text) for n, who, text in _LINE.findall(prompt)]
    episodes, facts = [], []
    for turn in CONVERSATION:
        asked = next((n for n, who, text in lines
                      if who == "Person" and text.startswith(turn.ask[:30])), None)
        if asked is None:
            continue
        episodes.append({"gist": turn.gist, "intent": turn.intent, "outcome": "answered",
                         "entities": list(turn.entities), "salience": 0.7, "valence": 0.4,
                         "open_loops": [], "first_line": asked, "last_line": asked + 1})
        facts += [{"key": key, "value": value, "kind": kind, "line": asked}
                  for key, value, kind in turn.facts]
    if not episodes:  # a window of other lines (a goal's news): one plain episode
        first = lines[0][0] if lines else 1
        episodes.append({"gist": "Chalie reported on the search for flights.",
                         "intent": "report", "outcome": "informed", "entities": ["Lisbon"],
                         "salience": 0.5, "valence": 0.3, "open_loops": [],
                         "first_line": first, "last_line": lines[-1][0] if lines else first})
    return {"episodes": episodes, "facts": facts, "concepts": list(CONCEPTS),
            "situation": SITUATION}


# --- filling the store ----------------------------------------------------------------------------

def fill(server: ServerProcess, model: Model, program: StubInterface) -> None:
    """Use the server as a person and their programs would: the conversation over /ws (its
    last turn starts a goal, run to its end), a scheduled prompt, a paired program and its
    signal, an API token."""
    client = server.connect()
    for turn in CONVERSATION:
        if turn.call is not None:
            name, arguments = turn.call
            model.queue(completion(tool_calls=[(name, json.dumps(arguments))],
                                   prompt_tokens=1400, completion_tokens=30))
        model.queue(completion(turn.answer, prompt_tokens=1600, completion_tokens=120))
        frames = client.turn(turn.ask)
        assert frames[-1].get("error") is None, frames[-1]
    cookie = server.login()
    with httpx.Client(base_url=server.url, cookies={"chalie_session": cookie},
                      timeout=WAIT_S) as http:
        wait_for(lambda: [g["state"] for g in http.get("/api/goals").json()["items"]]
                 == ["completed"])
        for url, body in (("/api/schedules", SCHEDULE),
                          ("/api/tokens", {"name": "laptop", "scopes": ["memory:read", "chat"]})):
            made = http.post(url, json=body)
            assert made.status_code == 201, made.text
        _, signal_token = pair(server.url, cookie, program, name="weather", signals=["weather"])
        sent = httpx.post(f"{server.url}/api/signals", json=SIGNAL, timeout=WAIT_S,
                          headers={"Authorization": f"Bearer {signal_token}"})
        assert sent.status_code == 202, sent.text
        wait_for(lambda: bool(http.get("/api/memory/episodes").json()["items"]))


# --- the pages ------------------------------------------------------------------------------------

class Camera:
    """One headless Chromium taking the images: the device and colour scheme are emulated over
    the DevTools protocol, each page opened afresh and shot once it shows what it must."""

    def __init__(self, driver: WebDriver, out: Path) -> None:
        self.driver, self.out = driver, out
        self.console = Console(driver)
        self.written: list[Path] = []

    def emulate(self, page: str, theme: str, device: str) -> None:
        width, height = size_of(page, device)
        mobile = device == "phone"
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
        self.driver.execute_cdp_cmd("Emulation.setScrollbarsHidden", {"hidden": True})
        self.driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {
            "enabled": mobile, "maxTouchPoints": 5})
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
            {"name": "prefers-color-scheme", "value": theme},
            {"name": "prefers-reduced-motion", "value": "reduce"}]})

    def take(self, page: str, theme: str, device: str, show: Callable[[WebDriver], None]) -> Path:
        """Emulate, let `show` open the page and wait for it, then write the image."""
        self.emulate(page, theme, device)
        self.driver.get("about:blank")
        name = f"{page}-{theme}-{device}"
        try:
            show(self.driver)
        except Exception:
            FAILED.mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(FAILED / f"{name}.png"))
            (FAILED / f"{name}.html").write_text(self.driver.page_source)
            print(f"screenshots: {name} failed; what the page showed: {FAILED / name}.png",
                  file=sys.stderr)
            raise
        self.driver.execute_script(  # no caret or focus ring in the picture
            "document.activeElement && document.activeElement.blur && "
            "document.activeElement.blur()")
        self.console.check()
        path = self.out / f"{name}.png"
        path.write_bytes(self.driver.get_screenshot_as_png())
        self.written.append(path)
        print(f"screenshots: {path}", file=sys.stderr)
        return path


def settled(driver: WebDriver) -> None:
    """The page has loaded and its web fonts (if any) are ready."""
    until(driver, lambda d: d.execute_script(
        "return document.readyState === 'complete' && document.fonts.status === 'loaded'"),
        "the page to load")


def show_login(server: ServerProcess) -> Callable[[WebDriver], None]:
    def show(driver: WebDriver) -> None:
        driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
        driver.get(server.url + "/")
        until(driver, lambda d: path_of(d) == "/login", "the login page")
        visible(driver, "#password")
        settled(driver)
    return show


def logged_in(driver: WebDriver, server: ServerProcess, path: str) -> None:
    """Open `path` of `server`, logging in first when the page asks for it."""
    page = path.partition("#")[0]
    driver.get(server.url + path)
    until(driver, lambda d: path_of(d) in ("/login", page), path)
    if path_of(driver) == "/login":  # no cookie, or one of the other server's
        driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
        login(driver, server, page)
        driver.get(server.url + path)


def show_chat(server: ServerProcess) -> Callable[[WebDriver], None]:
    last = CONVERSATION[-1].answer[:40]

    def show(driver: WebDriver) -> None:
        logged_in(driver, server, "/")
        connected(driver)
        wait_text(driver, '.answer[data-state="final"]', last)
        wait_text(driver, 'article.notification[data-source="goal"]', "EUR 89")
        # The last turn's details, open: its tokens, the tool it called (goal), its time.
        metrics = driver.find_elements(By.CSS_SELECTOR, "article.exchange details.metrics")[-1]
        metrics.find_element(By.CSS_SELECTOR, "summary").click()
        until(driver, lambda _: "goal" in metrics.text, "the last turn's details to open")
        settled(driver)
        driver.execute_script(
            "const m = document.getElementById('messages'); m.scrollTop = m.scrollHeight")
        until(driver, lambda d: d.execute_script(
            "const m = document.getElementById('messages');"
            "return m.scrollTop + m.clientHeight >= m.scrollHeight - 1"),
            "the conversation scrolled to its end")
    return show


def show_setup(server: ServerProcess) -> Callable[[WebDriver], None]:
    def show(driver: WebDriver) -> None:
        logged_in(driver, server, "/")
        visible(driver, "#setup")
        visible(driver, "#health-banner li[data-cause='model-primary-light']")
        visible(driver, "#llm-api-key-state")
        settled(driver)
    return show


# Each dashboard section with what it shows once filled.
FILLED = (
    ("#interfaces li.interface", "weather"),
    ("#tokens-list .token", "laptop"),
    ("#goals li.goal", "Find flights to Lisbon"),
    ("#schedules li.schedule", "Lisbon trip"),
    ("#knowledge-list li", "vegetarian"),
    ("#episodes-list li", "Lisbon"),
    ("#conversation-situation", "Planning a long weekend"),
    ("#signals li.signal", "sunny"),
    ("#turns li.turn", "flights"),
    ("#settings-llm .table-summary", MODEL),
)


def dashboard_filled(driver: WebDriver) -> None:
    for css, text in FILLED:
        wait_text(driver, css, text)
    find(driver, "svg#spending-chart")
    for error in driver.find_elements(By.CSS_SELECTOR, ".section-error"):
        assert not (error.is_displayed() and error.text.strip()), error.text
    settled(driver)


def show_brain(server: ServerProcess) -> Callable[[WebDriver], None]:
    def show(driver: WebDriver) -> None:
        logged_in(driver, server, "/brain")
        dashboard_filled(driver)
        driver.execute_script("window.scrollTo(0, 0)")
    return show


MARGIN = 12  # CSS pixels above the settings' box


def show_settings(server: ServerProcess) -> Callable[[WebDriver], None]:
    def show(driver: WebDriver) -> None:
        logged_in(driver, server, "/brain#settings")
        dashboard_filled(driver)
        top = "document.getElementById('settings').getBoundingClientRect().top"
        driver.execute_script(f"window.scrollBy(0, {top} - {MARGIN})")
        until(driver, lambda d: abs(d.execute_script(f"return {top}") - MARGIN) < 2,
              "the settings at the top of the window")
    return show


# --- the run --------------------------------------------------------------------------------------

def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/screenshots", description="Screenshots of the web pages for the docs: "
        "docs/images/<page>-<theme>-<device>.png, from the real pages with a stub model.")
    parser.add_argument("--out", type=Path, default=OUT,
                        help="the folder to write the images to (default: docs/images)")
    parser.add_argument("--only", nargs="+", choices=PAGES, default=list(PAGES),
                        metavar="PAGE", help=f"only these pages, of {', '.join(PAGES)}")
    parser.add_argument("--theme", nargs="+", choices=THEMES, default=list(THEMES),
                        help="only these colour schemes")
    parser.add_argument("--device", nargs="+", choices=DEVICES, default=list(DEVICES),
                        help="only these sizes")
    return parser.parse_args(argv)


@contextmanager
def quiet() -> Iterator[None]:
    """Only warnings from this process's own loggers (the servers log to their own pipes)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the images asked for; 0, or 1 with the reason on stderr."""
    args = parse(argv)
    if CHROMIUM is None or CHROMEDRIVER is None:
        print(f"screenshots: {SKIP_LINE.replace('browser tests skipped', 'cannot run')}",
              file=sys.stderr)
        return 1
    pages = [p for p in PAGES if p in args.only]
    args.out.mkdir(parents=True, exist_ok=True)
    with quiet(), ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chalie-shots-")))
        servers: list[ServerProcess] = []

        def stop_all() -> None:
            for server in servers:
                server.kill()
        stack.callback(stop_all)
        shows: dict[str, Callable[[WebDriver], None]] = {}
        if set(pages) - {"setup"}:
            model = Model()
            stack.callback(model.close)
            model.models = [MODEL, "llama3.2:3b"]
            program = StubInterface(name="weather", capabilities=[FORECAST])
            stack.callback(program.stop)
            (work / "main").mkdir()
            main_server = ServerProcess(work / "main", model, llm={"model": MODEL},
                                        memory={"encode_every_rows": 6})
            servers.append(main_server.start())
            if set(pages) - {"login"}:
                fill(main_server, model, program)
            shows |= {"login": show_login(main_server), "chat": show_chat(main_server),
                      "brain": show_brain(main_server), "settings": show_settings(main_server)}
        if "setup" in pages:
            (work / "setup").mkdir()
            fresh = ServerProcess(work / "setup", None, llm={"base_url": CLOSED, "retries": 0})
            servers.append(fresh.start())
            shows["setup"] = show_setup(fresh)
        (work / "profile").mkdir()
        driver = start_chrome(work / "profile")
        stack.callback(driver.quit)
        camera = Camera(driver, args.out)
        for page in sorted(pages, key=ORDER.index):
            for device in (d for d in DEVICES if d in args.device):
                for theme in (t for t in THEMES if t in args.theme):
                    camera.take(page, theme, device, shows[page])
        errors = [e for server in servers for e in server.errors()]
        if errors:
            print(f"screenshots: a server logged errors: {errors}", file=sys.stderr)
            return 1
    print(f"screenshots: {len(camera.written)} images in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
