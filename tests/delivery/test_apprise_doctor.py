"""`chalie doctor`'s line on the notification URLs: how many parse, and with which services;
an entry Apprise cannot use is a warning naming notify.urls and the entry, masked."""

from __future__ import annotations

import io
from collections.abc import Callable

from chalie import doctor, doctor_away
from chalie.config import Config

SECRET = "Kx81zQ-doctor-secret"


def lines(config: Config) -> list[str]:
    out = io.StringIO()
    doctor_away._apprise(doctor.Report(out, []), config)
    return out.getvalue().splitlines()


def test_urls_that_parse_are_one_ok_line_with_their_services(
    make_config: Callable[..., Config],
) -> None:
    """Two usable URLs: one ok line counting them and naming their services, no secret."""
    config = make_config(notify={"urls": [f"json://me:{SECRET}@127.0.0.1:9/hook",
                                          f"ntfys://ntfy.sh/alerts?token={SECRET}"]})
    assert lines(config) == ["ok    Apprise: 2 URLs parse (json, ntfy)"]


def test_an_entry_apprise_cannot_use_warns_naming_it_masked(
    make_config: Callable[..., Config],
) -> None:
    """The unusable entry is a warning naming notify.urls[1] with only its scheme; nothing of
    its secret is printed."""
    config = make_config(notify={"urls": ["json://127.0.0.1:9/hook",
                                          f"nosuchservice://me:{SECRET}@example.org/"]})
    assert lines(config) == [
        "warn  Apprise: notify.urls[1] nosuchservice://…: not a URL Apprise can use "
        "(https://github.com/caronc/apprise/wiki); fix or remove it in notify.urls (nothing "
        "is sent to it)"]


def test_no_urls_is_said_plainly(make_config: Callable[..., Config]) -> None:
    """No URLs is fine: one ok line saying there are none, and which setting adds them."""
    assert lines(make_config()) == ["ok    Apprise: no notification URLs configured "
                                    "(notify.urls)"]
