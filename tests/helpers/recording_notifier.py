"""Another notifier than SMTP, for the connection's "notifiers" list: Airflow imports
it by its dotted path (`helpers.recording_notifier.RecordingNotifier`) when a notice
is due, after the session configured Airflow (never import this module before)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier


class RecordingNotifier(BaseNotifier):
    """Appends its rendered `text` (a template) to the file `path`, one JSON line each."""

    template_fields = ("text",)

    def __init__(self, path: str, text: str) -> None:
        super().__init__()
        self.path = path
        self.text = text

    def notify(self, context: Any) -> None:
        with Path(self.path).open("a", encoding="utf-8") as out:
            out.write(json.dumps(self.text) + "\n")
