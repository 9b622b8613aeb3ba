"""/api/schedules: prompts that run later, once (`at`) or on a cron schedule.

POST {prompt, at} (ISO 8601 with a UTC offset) or {prompt, cron, timezone} (five cron fields,
an IANA zone; the zone defaults to dmn.timezone's) -> 201 with the schedule, `id` and `next_run`
first among its fields. A bad cron, an unknown zone, a time in the past or a missing field is a
400 naming the field. GET lists them (?state=active|done|missed|cancelled, limit, offset);
GET /api/schedules/<id> adds its latest runs; DELETE cancels one (409 when it already ran for
good). Times the person gave or will see (`at`, `next_run`, `last_run`) are ISO 8601 in the
schedule's zone; `created_at` is epoch seconds, as everywhere else.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import apsw
import msgspec

from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.background import schedules
from chalie.background.schedules import MAX_PROMPT, ScheduleError
from chalie.edge.api_spec import COOKIE_AUTH, OFFSET, Operation, limit_param, one_of, path_id
from chalie.edge.rest_base import ApiError, AuthedHandler, JsonHandler, QueryParams, shown
from chalie.store import schedule_rows
from chalie.store.background_ops import CancelSchedule, InsertSchedule
from chalie.store.schedule_rows import ScheduleRow

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
RUNS_SHOWN = 20


# Request fields decoded as any JSON value (see ScheduleBody), documented as what they should be.
_Prompt = Annotated[Any, msgspec.Meta(description="what to run", extra_json_schema={
    "type": "string", "minLength": 1, "maxLength": MAX_PROMPT})]
_OPTIONAL = {"type": ["string", "null"]}  # null: not given
_At = Annotated[Any, msgspec.Meta(description="once, at this ISO 8601 time with a UTC offset",
                                  extra_json_schema=_OPTIONAL)]
_Cron = Annotated[Any, msgspec.Meta(description="five cron fields",
                                    extra_json_schema=_OPTIONAL)]
_Zone = Annotated[Any, msgspec.Meta(
    description="the IANA zone `cron` is read in (default: dmn.timezone's)",
    extra_json_schema=_OPTIONAL)]


class ScheduleBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Fields typed loosely on purpose: schedules.check names the field and says what is
    wrong with it, for every way in (REST and the `schedule` tool) alike. Give `at` or `cron`."""

    prompt: _Prompt
    at: _At = None
    cron: _Cron = None
    timezone: _Zone = None


class Schedule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Times the person gave or will see are ISO 8601 in the schedule's zone; `created_at` is
    epoch seconds."""

    id: str
    next_run: str | None
    prompt: str
    at: str | None
    cron: str | None
    timezone: str
    last_run: str | None
    state: Literal["active", "done", "missed", "cancelled"]
    source: Literal["person", "tool", "dmn"]
    turn_id: str | None
    created_at: float


class ScheduleRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    due_at: str
    outcome: Literal["done", "failed", "missed"]
    turn_id: str | None
    ran_at: float
    error: str | None


class ScheduleDetail(Schedule, frozen=True, forbid_unknown_fields=True):
    runs: list[ScheduleRun]  # the latest, newest first


class ScheduleList(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[Schedule]


def schedule_document(row: ScheduleRow) -> Schedule:
    zone = row.timezone

    def when(ts: float | None) -> str | None:
        return None if ts is None else schedules.iso(ts, zone)

    return Schedule(
        id=row.id, next_run=when(row.next_run), prompt=row.prompt, at=when(row.at),
        cron=row.cron, timezone=zone, last_run=when(row.last_run),
        state=row.state, source=row.source,  # type: ignore[arg-type]
        turn_id=row.turn_id, created_at=row.created_at)


_ID = (path_id("schedule_id", "the schedule's id"),)


async def apply(handler: JsonHandler, *ops: Any) -> tuple[Any, ...]:
    """Apply background ops through the StoreWriter; their values, or a 503."""
    result: OpsApplied = await handler.ask("store_writer", ApplyOps(tuple(ops)))
    if result.error is not None:
        raise ApiError(503, f"the store refused the change: {result.error}")
    return result.values


class SchedulesHandler(AuthedHandler):
    api = {
        "get": Operation("Scheduled prompts, newest first", {200: ScheduleList},
                         auth=(COOKIE_AUTH,), query=(
                             one_of("state", schedule_rows.STATES, "only schedules in it"),
                             limit_param(DEFAULT_LIMIT, MAX_LIMIT), OFFSET)),
        "post": Operation("Schedule a prompt: once (`at`) or on a cron schedule",
                          {201: Schedule}, auth=(COOKIE_AUTH,), body=ScheduleBody, example={
                              "prompt": "Remind me to stretch", "cron": "0 9 * * 1-5",
                              "timezone": "Europe/Paris"},
                          description="A bad cron, an unknown zone, a time in the past or a "
                                      "missing field is a 400 naming the field."),
    }

    async def get(self) -> None:
        params = self.query_params("state", "limit", "offset")
        state = _state(params)
        limit = params.whole("limit", default=DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
        offset = params.whole("offset", default=0, lo=0)
        rows = await self.off_loop(lambda: schedule_rows.listing(
            self.ctx.read(), state=state, limit=limit, offset=offset))
        self.write_json(ScheduleList([schedule_document(r) for r in rows]))

    async def post(self) -> None:
        self.query_params()
        body = self.decode_body(ScheduleBody)
        now = self.ctx.clock.time()
        try:
            spec = schedules.check(body.prompt, at=body.at, cron=body.cron,
                                   timezone=body.timezone, now=now,
                                   default_zone=self.ctx.default_zone)
        except ScheduleError as e:
            raise ApiError(400, f"{e.field}: {e}") from None
        next_run = schedules.next_after(spec, now)
        if next_run is None:
            raise ApiError(400, "at: is in the past")
        row = ScheduleRow(id=uuid.uuid4().hex[:12], prompt=spec.prompt,
                          timezone=spec.timezone, at=spec.at, cron=spec.cron,
                          next_run=next_run, last_run=None, state="active", source="person",
                          turn_id=None, created_at=now)
        await apply(self, InsertSchedule(row))
        self.set_status(201)
        self.write_json(schedule_document(row))


class ScheduleHandler(AuthedHandler):
    api = {
        "get": Operation("A schedule with its latest runs", {200: ScheduleDetail},
                         auth=(COOKIE_AUTH,), path=_ID, errors=(404,)),
        "delete": Operation("Cancel a schedule (409 when it already ran for good)",
                            {200: Schedule}, auth=(COOKIE_AUTH,), path=_ID, errors=(404, 409)),
    }

    async def get(self, schedule_id: str) -> None:
        self.query_params()
        found = await self.off_loop(lambda: _with_runs(self.ctx.read(), schedule_id))
        if found is None:
            raise ApiError(404, f"no schedule {shown(schedule_id)}")
        self.write_json(found)

    async def delete(self, schedule_id: str) -> None:
        self.query_params()
        (before,) = await apply(self, CancelSchedule(schedule_id))
        if before is None:
            raise ApiError(404, f"no schedule {shown(schedule_id)}")
        if before in ("done", "missed"):
            raise ApiError(409, f"schedule {schedule_id} is {before}: it will not run again, "
                                "so there is nothing to cancel")
        row = await self.off_loop(lambda: schedule_rows.get(self.ctx.read(), schedule_id))
        assert row is not None
        self.write_json(schedule_document(row))


def _with_runs(conn: apsw.Connection, schedule_id: str) -> ScheduleDetail | None:
    row = schedule_rows.get(conn, schedule_id)
    if row is None:
        return None
    runs = schedule_rows.runs(conn, schedule_id, RUNS_SHOWN)
    for run in runs:
        run["due_at"] = schedules.iso(float(run["due_at"]), row.timezone)  # type: ignore[arg-type]
    return ScheduleDetail(**msgspec.structs.asdict(schedule_document(row)),
                          runs=msgspec.convert(runs, list[ScheduleRun]))


def _state(params: QueryParams) -> str | None:
    state = params.text("state", max_chars=20)
    if state is not None and state not in schedule_rows.STATES:
        raise ApiError(400, f"state: one of {', '.join(schedule_rows.STATES)}, got "
                            f"{shown(state)}")
    return state
