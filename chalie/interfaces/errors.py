"""The one error of the interface contract.

    ChalieError
     └─ InterfaceError   a paired interface could not be reached, or answered outside the
                         contract; the message names the request or the field that failed
"""

from __future__ import annotations

import msgspec

from chalie.errors import ChalieError


class InterfaceError(ChalieError):
    """A paired interface did not answer, or answered something Chalie cannot use.

    Messages name what failed, so they can go to the person or the model as they are:
    "GET http://127.0.0.1:9001/health: connection refused",
    "capabilities[2].parameters[0].type: must be string, number, boolean or object".
    """


def shown(value: object, limit: int = 40) -> str:
    """A value as an error message quotes it: JSON, cut to `limit` characters."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
