"""What the edge and the Delivery actor share of delivery away from the page: the senders in
use (by name: webpush, apprise, telegram), the server's VAPID public key, and which exchanges
the person holds in their Telegram chat."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from chalie.delivery.senders import Sender, Target


@dataclass
class Away:
    senders: list[Sender] = field(default_factory=list)
    vapid_public_key: str = ""  # base64url, the uncompressed P-256 point (GET /api/push/key)
    # Whether an exchange runs in a conversation the person holds elsewhere (their Telegram
    # chat): its escalations are shown there, with their buttons, and delivered nowhere else.
    conversing: Callable[[str | None], bool] = lambda exchange_id: False

    def named(self, name: str) -> Sender | None:
        return next((s for s in self.senders if s.name == name), None)

    def targets(self) -> list[tuple[Sender, Target]]:
        """Every target of every sender now."""
        return [(sender, target) for sender in self.senders for target in sender.targets()]
