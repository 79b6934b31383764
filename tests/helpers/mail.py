"""A real SMTP server for tests (aiosmtpd) on a free loopback port, keeping every
message it receives, and the Airflow connection that points notices at it."""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller

#: Who the test connection sends notices to, and from.
RECIPIENT = "sre-oncall@example.com"
SENDER = "kafka-dr@example.com"


@dataclass(frozen=True)
class Mail:
    """One message as received: its envelope recipients, subject and HTML body."""

    recipients: tuple[str, ...]
    subject: str
    html: str


class Inbox:
    """What the server received, in order (aiosmtpd's handler interface)."""

    def __init__(self) -> None:
        #: The server's port, once it listens.
        self.port = 0
        self._mails: list[Mail] = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd hook
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        body = message.get_body(("html", "plain"))
        with self._lock:
            self._mails.append(
                Mail(
                    tuple(envelope.rcpt_tos),
                    str(message["Subject"]),
                    body.get_content() if body is not None else "",
                )
            )
        return "250 Message accepted for delivery"

    @property
    def mails(self) -> list[Mail]:
        with self._lock:
            return list(self._mails)

    def take(self) -> list[Mail]:
        """Every mail received since the last `take`."""
        with self._lock:
            taken, self._mails = self._mails, []
            return taken


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def smtp_server() -> Iterator[Inbox]:
    """An SMTP server on 127.0.0.1 (plain, no TLS, no login) for the block."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    inbox.port = controller.port
    try:
        yield inbox
    finally:
        controller.stop()


def notifications_connection(port: int, **extra: Any) -> str:
    """The `dr_notifications` connection for an `AIRFLOW_CONN_...` variable: the test
    server, plain SMTP, one recipient; `extra` adds to or overrides its extra."""
    settings = {
        "to": RECIPIENT,
        "from_email": SENDER,
        "disable_ssl": True,
        "disable_tls": True,
        "retry_limit": 0,
        "timeout": 10,
        **extra,
    }
    return json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": port, "extra": settings})
