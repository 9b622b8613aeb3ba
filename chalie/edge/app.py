"""The Tornado application: routes and settings."""

from __future__ import annotations

import tornado.web

from chalie.edge.context import EdgeContext
from chalie.edge.mcp_http import McpServerHandler
from chalie.edge.openai_chat import ChatHandler, ModelsHandler
from chalie.edge.openapi import PATH as OPENAPI_PATH
from chalie.edge.openapi import OpenApiHandler
from chalie.edge.pages import (
    CardHandler,
    PageHandler,
    RootFileHandler,
    SessionHandler,
    StaticHandler,
)
from chalie.edge.rest_auth import LoginHandler, LogoutHandler
from chalie.edge.rest_background import ProactiveHandler, SpendingHandler
from chalie.edge.rest_consent import (
    AllowanceHandler,
    AllowancesHandler,
    AnswerHandler,
    ApprovalsHandler,
)
from chalie.edge.rest_gateway import GatewayRenderHandler
from chalie.edge.rest_goals import GoalHandler, GoalsHandler
from chalie.edge.rest_images import ImageHandler, ImagesHandler
from chalie.edge.rest_interfaces import (
    InterfaceHandler,
    InterfacesHandler,
    PairHandler,
    PairingKeyHandler,
    RefreshHandler,
)
from chalie.edge.rest_mcp import McpHandler
from chalie.edge.rest_memory import (
    EpisodesHandler,
    ForgetEpisodeHandler,
    ForgetKnowledgeHandler,
    KnowledgeHandler,
    SearchHandler,
)
from chalie.edge.rest_messages import MessagesHandler
from chalie.edge.rest_notify import NotifyLogHandler, NotifyTestHandler
from chalie.edge.rest_ops import HealthHandler, MetricsHandler
from chalie.edge.rest_push import (
    PushDeviceHandler,
    PushDevicesHandler,
    PushKeyHandler,
    TestPushHandler,
)
from chalie.edge.rest_schedules import ScheduleHandler, SchedulesHandler
from chalie.edge.rest_settings import SettingsHandler, TestHandler
from chalie.edge.rest_signals import BatchHandler, SignalHandler
from chalie.edge.rest_state import StateHandler
from chalie.edge.rest_subscriptions import SubscriptionHandler, SubscriptionsHandler
from chalie.edge.rest_telegram import PairingCodeHandler, TelegramChatHandler, TelegramHandler
from chalie.edge.rest_tokens import TokenHandler, TokensHandler
from chalie.edge.rest_turns import TurnPromptsHandler, TurnsHandler
from chalie.edge.ws import ChatSocket

# Tornado closes a socket outright past this size; below it, frames over server.max_frame_bytes
# get an `error` frame and the socket stays open.
HARD_FRAME_LIMIT = 16 * 1024 * 1024


def make_app(ctx: EdgeContext) -> tornado.web.Application:
    args = {"ctx": ctx}
    return tornado.web.Application(
        [
            (r"/", PageHandler, {**args, "page": "index.html"}),
            (r"/brain", PageHandler, {**args, "page": "brain.html"}),
            (r"/login", PageHandler, {**args, "page": "login.html", "public": True}),
            (r"/static/(.*)", StaticHandler, args),
            (r"/manifest\.webmanifest", RootFileHandler, {"name": "manifest.webmanifest"}),
            (r"/sw\.js", RootFileHandler, {"name": "sw.js"}),
            (r"/cards/([^/]+)/([^/]+)", CardHandler, args),
            (r"/auth/session", SessionHandler, args),
            (r"/health", HealthHandler, args),
            (r"/metrics", MetricsHandler, args),
            (r"/auth/login", LoginHandler, args),
            (r"/auth/logout", LogoutHandler, args),
            (r"/ws", ChatSocket, args),
            (r"/api/memory/knowledge", KnowledgeHandler, args),
            (r"/api/memory/episodes", EpisodesHandler, args),
            (r"/api/memory/search", SearchHandler, args),
            # Any id text reaches the handler, so a bad one gets a JSON 400 naming `id`.
            (r"/api/memory/knowledge/(.*)", ForgetKnowledgeHandler, args),
            (r"/api/memory/episodes/(.*)", ForgetEpisodeHandler, args),
            (r"/api/turns", TurnsHandler, args),
            (r"/api/turns/(.*)/prompts", TurnPromptsHandler, args),
            (r"/api/interfaces/pairing-key", PairingKeyHandler, args),
            (r"/api/interfaces/pair", PairHandler, args),
            (r"/api/interfaces", InterfacesHandler, args),
            (r"/api/interfaces/([^/]+)/refresh", RefreshHandler, args),
            (r"/api/interfaces/([^/]+)", InterfaceHandler, args),
            (r"/api/signals", SignalHandler, args),
            (r"/api/signals/batch", BatchHandler, args),
            (r"/api/messages", MessagesHandler, args),
            (r"/gw/([^/]+)/render", GatewayRenderHandler, args),
            (r"/api/subscriptions", SubscriptionsHandler, args),
            # Any id text reaches the handler, so an unknown one gets a JSON 404.
            (r"/api/subscriptions/(.*)", SubscriptionHandler, args),
            (r"/api/schedules", SchedulesHandler, args),
            (r"/api/schedules/([^/]+)", ScheduleHandler, args),
            (r"/api/goals", GoalsHandler, args),
            (r"/api/goals/([^/]+)", GoalHandler, args),
            (r"/api/spending", SpendingHandler, args),
            (r"/api/proactive", ProactiveHandler, args),
            (r"/api/images", ImagesHandler, args),
            (r"/api/images/([^/]+)", ImageHandler, args),
            (r"/api/mcp", McpHandler, args),
            (r"/api/state", StateHandler, args),
            (r"/api/settings", SettingsHandler, args),
            (r"/api/settings/test", TestHandler, args),
            (r"/api/tools/allowances", AllowancesHandler, args),
            (r"/api/tools/allowances/([^/]+)", AllowanceHandler, args),
            (r"/api/approvals", ApprovalsHandler, args),
            (r"/api/approvals/([^/]+)", AnswerHandler, args),
            (r"/api/push/key", PushKeyHandler, args),
            (r"/api/push/subscriptions", PushDevicesHandler, args),
            (r"/api/push/subscriptions/([^/]+)", PushDeviceHandler, args),
            (r"/api/push/subscriptions/([^/]+)/test", TestPushHandler, args),
            (r"/api/notify/test", NotifyTestHandler, args),
            (r"/api/notify/log", NotifyLogHandler, args),
            (r"/api/telegram", TelegramHandler, args),
            (r"/api/telegram/pairing-code", PairingCodeHandler, args),
            (r"/api/telegram/chats/([^/]+)", TelegramChatHandler, args),
            (r"/api/tokens", TokensHandler, args),
            (r"/api/tokens/([^/]+)", TokenHandler, args),
            (r"/mcp", McpServerHandler, args),  # MCP over streamable HTTP (edge/mcp_http.py)
            (r"/v1/models", ModelsHandler, args),
            (r"/v1/chat/completions", ChatHandler, args),
            (OPENAPI_PATH, OpenApiHandler, args),
        ],
        websocket_max_message_size=max(HARD_FRAME_LIMIT, ctx.config.server.max_frame_bytes),
        websocket_ping_interval=None,
        log_function=lambda handler: None,
    )
