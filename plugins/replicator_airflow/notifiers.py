"""Telling people about DR incidents through Airflow's notifiers.

A failed supervisor check, a wrong copy found by verification and a procedure
waiting for approval become incidents (`replicator.operations.incidents`, kept
in the DR state store), so each is told once when it opens, at a long interval
while it stays open, and once when it is resolved; not every minute. This module
only sends what that decision claimed, through Airflow notifiers:

- SMTP (`SmtpNotifier` of Airflow's SMTP provider) when the Airflow connection
  `dr_notifications` names a mail server: host, port, login and password as for
  any SMTP connection, and in its extra the recipients (`to`), the sender
  (`from_email`) and SmtpHook's own switches (`disable_ssl`, `disable_tls`, ...);
- any other notifier (Slack, Teams, PagerDuty, ...) listed in the same extra as
  `"notifiers": [{"class": "dotted.path.Notifier", "kwargs": {...}}]`, its
  kwargs rendered as Airflow templates with `dr_notice` in the context
  (`dr_notice.subject`, `.text`, `.html`, `.change`, `.key`, `.links`).

A new notifier is built for every notice (notifiers render their templates in
place, once). Every notice is also one WARNING line in the task log, for
log-based alerting, with or without the connection. A notice that a notifier
could not send is handed back to the state store and sent again on the next run;
the task then fails naming the notifier and the connection to check, unless it
fails anyway (the supervisor found problems), in which case that is added to its
error. An approval is asked all the same when its notice cannot be sent: the
error is logged, and the question waits in Airflow's Required Actions page.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import jinja2
from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import BaseHook, BaseNotifier, Context, conf
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.module_loading import import_string

from replicator.errors import ReplicatorError
from replicator.operations import (
    IncidentPolicy,
    Notice,
    approval_finding,
    notice_subject,
    notice_text,
    release,
    track,
    verification_finding,
)
from replicator.statestore import StateStore
from replicator_airflow.hooks import ReplicatorHook
from replicator_airflow.procedure_ids import procedure_id

log = logging.getLogger(__name__)

#: The Airflow connection that says where notices go (see the module docstring).
NOTIFICATIONS_CONN_ID = "dr_notifications"
SMTP_NOTIFIER = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"
#: The DR status page under Airflow's base URL: `dr_status_plugin.URL_PREFIX`, not
#: imported from there because importing that module builds the page's web app.
STATUS_PAGE_PATH = "/dr-status/"

#: An approval is asked once and answered once: no reminder (the question has its own
#: deadline), resolved as soon as it is answered.
_APPROVAL = IncidentPolicy(remind_every=None, resolve_after=timedelta(0))

_HTML = jinja2.Environment(autoescape=True).from_string(
    """<div style="font-family: sans-serif; font-size: 14px">
<h2 style="font-size: 16px">{{ subject }}</h2>
<pre style="white-space: pre-wrap; font-size: 13px">{{ text }}</pre>
<p>{% for name, url in links.items() %}<a href="{{ url }}">{{ name }}</a>{% if not loop.last %}
 &middot; {% endif %}{% endfor %}</p>
</div>"""
)


@dataclass(frozen=True)
class NotifierSpec:
    """One notifier to build per notice: its class and keyword arguments (templates)."""

    class_path: str
    kwargs: Mapping[str, Any]

    def build(self) -> BaseNotifier:
        return import_string(self.class_path)(**self.kwargs)


@dataclass(frozen=True)
class NotificationSettings:
    """Where notices go and how often (the connection `conn_id`; none: the log only)."""

    conn_id: str = NOTIFICATIONS_CONN_ID
    notifiers: tuple[NotifierSpec, ...] = ()
    policy: IncidentPolicy = field(default_factory=IncidentPolicy)

    @classmethod
    def load(cls, conn_id: str = NOTIFICATIONS_CONN_ID) -> NotificationSettings:
        """The settings of connection `conn_id`, checked (a wrong class or a missing
        recipient fails here, naming the connection, not at 3 a.m. when a mail is due)."""
        try:
            connection = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            return cls(conn_id)
        extra = connection.extra_dejson
        notifiers = []
        if connection.host:
            if not extra.get("to"):
                raise ReplicatorError(
                    f"Airflow connection {conn_id!r} names a mail server but no recipients: "
                    'set "to" in its extra (an address or a list of addresses)'
                )
            notifiers.append(
                NotifierSpec(
                    SMTP_NOTIFIER,
                    {
                        "smtp_conn_id": conn_id,
                        "to": extra["to"],
                        "subject": "{{ dr_notice.subject }}",
                        "html_content": "{{ dr_notice.html }}",
                    },
                )
            )
        notifiers += [_spec(conn_id, entry) for entry in extra.get("notifiers") or []]
        remind = float(extra.get("remind_every_minutes", 240))
        policy = IncidentPolicy(
            remind_every=timedelta(minutes=remind) if remind > 0 else None,
            resolve_after=timedelta(minutes=float(extra.get("resolve_after_minutes", 5))),
        )
        return cls(conn_id, tuple(notifiers), policy)


def _spec(conn_id: str, entry: Any) -> NotifierSpec:
    """One entry of the extra's "notifiers", its class imported to check it."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("class"), str):
        raise ReplicatorError(
            f'Airflow connection {conn_id!r}: each entry of "notifiers" in its extra is '
            '{"class": "dotted.path.Notifier", "kwargs": {...}}; got ' + repr(type(entry).__name__)
        )
    try:
        notifier = import_string(entry["class"])
    except ImportError as exc:
        raise ReplicatorError(
            f"Airflow connection {conn_id!r}: notifier class {entry['class']!r} cannot be "
            f"imported ({exc}); install its provider or fix the dotted path"
        ) from None
    if not (isinstance(notifier, type) and issubclass(notifier, BaseNotifier)):
        raise ReplicatorError(
            f"Airflow connection {conn_id!r}: {entry['class']!r} is not an Airflow notifier "
            "(a subclass of airflow.sdk.BaseNotifier)"
        )
    return NotifierSpec(entry["class"], dict(entry.get("kwargs") or {}))


@dataclass(frozen=True)
class RenderedNotice:
    """A notice as notifier templates see it (`dr_notice`)."""

    change: str
    key: str
    subject: str
    #: Plain text, links included: for chat notifiers.
    text: str
    html: str
    links: dict[str, str]


class NotificationFailed(ReplicatorError):
    """A notifier could not send a notice; it is sent again on the next run."""


def render(notice: Notice, policy: IncidentPolicy, links: Mapping[str, str]) -> RenderedNotice:
    subject = notice_subject(notice)
    body = notice_text(notice, policy)
    text = "\n".join([body, "", *(f"{name}: {url}" for name, url in links.items())])
    html = _HTML.render(subject=subject, text=body, links=links)
    return RenderedNotice(notice.change, notice.incident.key, subject, text, html, dict(links))


def airflow_url(path: str = "") -> str:
    """A URL under Airflow's own ([api] base_url)."""
    base = conf.get("api", "base_url", fallback="http://localhost:8080/")
    return base.rstrip("/") + path


def links(context: Context, **extra: str) -> dict[str, str]:
    """Where to look: the DR status page, the Airflow task that found it, and `extra`."""
    return {
        "DR status page": airflow_url(STATUS_PAGE_PATH),
        "Airflow task": context["ti"].log_url,
        **extra,
    }


def deliver(
    context: Context,
    notices: Sequence[Notice],
    store: StateStore,
    settings: NotificationSettings,
    extra_links: Mapping[str, str] | None = None,
) -> None:
    """Send every notice through every notifier; NotificationFailed, after trying
    them all, when one could not be sent (those notices are handed back)."""
    failures = []
    for notice in notices:
        shown = render(notice, settings.policy, links(context, **(extra_links or {})))
        log.warning("DR notice: %s\n%s", shown.subject, shown.text)
        failed = []
        for spec in settings.notifiers:
            try:
                spec.build()({**context, "dr_notice": shown})
            except Exception as exc:  # any notifier's error: hand the notice back
                failed.append(f"{spec.class_path.rsplit('.', 1)[-1]}: {exc}")
        if failed:
            release(store.incidents, notice)
            failures.append(f"{shown.subject!r} ({'; '.join(failed)})")
    if failures:
        raise NotificationFailed(
            f"could not send {len(failures)} DR notice(s), sent again on the next run: "
            f"{', '.join(failures)}; check the Airflow connection {settings.conn_id!r} (host, "
            "port, login; in its extra to, from_email, disable_ssl/disable_tls, notifiers)"
        )


def tell(
    context: Context,
    notices: Sequence[Notice],
    store: StateStore,
    settings: NotificationSettings,
    *,
    failing: BaseException | None = None,
) -> None:
    """`deliver`; when the task fails anyway (`failing`, about to be raised), a
    delivery failure is added to that error instead of replacing it."""
    try:
        deliver(context, notices, store, settings)
    except NotificationFailed as exc:
        if failing is None:
            raise
        log.error("%s", exc)  # on its own line: the task's error below is another one
        failing.add_note(str(exc))


def notify_verification(
    context: Context,
    store: StateStore,
    flow: str,
    run_id: str,
    summary: Mapping[str, Any],
    *,
    failing: BaseException | None = None,
    settings: NotificationSettings | None = None,
) -> None:
    """A verification's verdict: a wrong copy opens (or keeps) the flow's incident,
    a right one resolves it."""
    settings = settings or NotificationSettings.load()
    docs = airflow_url(f"{STATUS_PAGE_PATH}runs/{quote(run_id, safe='')}/data-docs/index.html")
    finding = verification_finding(flow, run_id, summary, docs)
    notices = track(
        store.incidents,
        "verification",
        flow,
        [finding] if finding else [],
        policy=settings.policy,
        resolution=f"verification run {run_id} found the copy right",
    )
    tell(context, notices, store, settings, failing=failing)


class ApprovalNotifier(BaseNotifier):
    """Announce a human-in-the-loop question (pass it to an approval operator's
    `notifiers`): once per run, through the notifiers of connection `conn_id`, with
    the question, the run, the deadline and the Required Actions page;
    `approval_answered` ends it."""

    def __init__(self, conn_id: str = NOTIFICATIONS_CONN_ID) -> None:
        super().__init__()
        self.conn_id = conn_id

    def notify(self, context: Context) -> None:
        task = context["task"]
        deadline = getattr(task, "hitl_summary_extra", {}).get("timeout_datetime")
        finding = approval_finding(
            procedure_id(context),
            str(getattr(task, "subject", task.task_id)),
            str(getattr(task, "body", "") or ""),
            _moment(deadline) if deadline else "no deadline",
        )
        settings = NotificationSettings.load(self.conn_id)
        store = _store(context)
        try:
            notices = track(store.incidents, "approval", finding.scope, [finding], policy=_APPROVAL)
            deliver(context, notices, store, settings, {"Answer it": _answer_link(context)})
        except NotificationFailed as exc:
            self.log.error("%s; the question is asked all the same: %s", exc, _answer_link(context))
        finally:
            store.close()


def approval_answered(
    context: Context, procedure: str, answer: str, conn_id: str = NOTIFICATIONS_CONN_ID
) -> None:
    """The approval of `procedure` was answered (`answer`, e.g. "approved by
    alice"): its incident is resolved, and people are told (a failure to tell is
    logged: the procedure goes on either way)."""
    settings = NotificationSettings.load(conn_id)
    store = _store(context)
    try:
        notices = track(
            store.incidents,
            "approval",
            procedure,
            [],
            policy=_APPROVAL,
            resolution=answer,
        )
        deliver(context, notices, store, settings)
    except NotificationFailed as exc:
        log.error("%s", exc)
    finally:
        store.close()


def _store(context: Context) -> StateStore:
    conn_id = getattr(context["task"], "replicator_conn_id", ReplicatorHook.default_conn_name)
    return StateStore(ReplicatorHook(conn_id).settings().state_url)


def _moment(iso: str) -> str:
    return f"{datetime.fromisoformat(iso):%Y-%m-%d %H:%M:%S %Z}".strip()


def _answer_link(context: Context) -> str:
    """The Required Actions page of the question, when Airflow knows its own URL."""
    try:
        return HITLOperator.generate_link_to_ui_from_context(context=context)
    except ValueError as exc:  # no [api] base_url configured, or not a HITL task
        return f"Airflow's Required Actions page ({exc})"
