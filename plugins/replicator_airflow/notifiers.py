"""Telling people that a DR procedure waits for their answer.

A failover's approval is useless if nobody knows it is asked: `ApprovalNotifier`
writes one WARNING line to the task log (where log-based alerting sees it) with
the question, the run, the deadline and the link to Airflow's Required Actions
page, and hands the same context to every notifier in `forward`: any Airflow
notifier the deployment uses (`SmtpNotifier`, `SlackNotifier`, ...), configured
where the DAG creates it.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import BaseNotifier, Context


class ApprovalNotifier(BaseNotifier):
    """Announce a human-in-the-loop question (pass it to an approval operator's
    `notifiers`), and forward it to the notifiers in `forward`."""

    def __init__(self, forward: Sequence[BaseNotifier] = ()) -> None:
        super().__init__()
        self.forward = list(forward)

    def notify(self, context: Context) -> None:
        task = context["task"]
        ti = context["task_instance"]
        deadline = getattr(task, "hitl_summary_extra", {}).get("timeout_datetime") or "no deadline"
        self.log.warning(
            "approval needed: %s (DAG %s, run %s); answer by %s at %s",
            getattr(task, "subject", task.task_id),
            ti.dag_id,
            ti.run_id,
            deadline,
            _link(context),
        )
        for notifier in self.forward:
            notifier(context)


def _link(context: Context) -> str:
    """The Required Actions page of the question, when Airflow knows its own URL."""
    try:
        return HITLOperator.generate_link_to_ui_from_context(context=context)
    except ValueError as exc:  # no [api] base_url configured, or not a HITL task
        return f"Airflow's Required Actions page ({exc})"
