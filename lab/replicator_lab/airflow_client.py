"""The few calls of Airflow's REST API (v2) that the local stack, the Docker stack's
test and the browser tests make: a token from the simple auth manager, DAGs,
runs, task instances and their logs, a task's human-in-the-loop question answered
(as a person on the Required Actions page answers it), and a failed run's report.

It speaks HTTP with httpx and never imports Airflow, so it drives any Airflow 3
API server: the one `airflow.AirflowStandalone` starts, or a compose stack's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from replicator_lab.errors import StackError

log = logging.getLogger(__name__)

#: Terminal states of a DAG run.
FINISHED = frozenset({"success", "failed"})
#: How often a wait on Airflow asks again.
POLL_S = 1.0
#: Keys of a task-log entry that every line repeats, or that `_log_line` renders itself.
_LOG_CONTEXT_KEYS = frozenset(
    {"timestamp", "level", "event", "logger", "error_detail", "filename", "lineno"}
    | {"map_index", "try_number", "task_id", "dag_id", "ti_id", "run_id"}
)
_HTTP_TIMEOUT_S = 30.0
#: Calls that do the same however often they are sent, so a call that timed out or
#: lost its connection is sent again (`POST /auth/token` only hands out a token). A
#: new DAG run (`POST .../dagRuns`) is not: sent twice, it would start two runs.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE"})
_ATTEMPTS = 3
#: A task waiting for a person's answer: parked (Airflow 3.3), or deferred (3.1, 3.2).
_ASKING = frozenset({"awaiting_input", "deferred"})
#: How long a question has been waiting before `AirflowClient.answer` answers it. Airflow
#: 3.3 resumes a parked task the moment it is answered; when that is before the
#: scheduler has taken the executor's "finished" event of the try that parked it (about
#: 1.5 s after the question, on a loaded host), the scheduler finds the task queued,
#: says its state "changed externally" and fails it (the browser test's first run of the
#: approval did). A person never answers that fast; a script waits this long.
ANSWER_SETTLE_S = 20.0


class AirflowClient:
    """The few calls of Airflow's REST API (v2) the stack and its tests need."""

    def __init__(
        self, url: str, username: str, password: str, timeout_s: float = _HTTP_TIMEOUT_S
    ) -> None:
        """`timeout_s`: per request; a compose stack on a loaded host answers slower."""
        self.url = url.rstrip("/")
        self.username = username
        self._credentials = {"username": username, "password": password}
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AirflowClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def token(self) -> str:
        """A JWT from `POST /auth/token` (kept until the API refuses it)."""
        if self._token is None:
            response = self._send("POST", "/auth/token", retry=True, json=self._credentials)
            _check(response, "POST /auth/token")
            self._token = str(response.json()["access_token"])
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """`method path` with the token; the decoded JSON, or StackError naming the call."""
        for attempt in range(2):
            headers = {"Authorization": f"Bearer {self.token()}", "Accept": "application/json"}
            response = self._send(
                method, path, retry=method in _IDEMPOTENT, headers=headers, **kwargs
            )
            if response.status_code == httpx.codes.UNAUTHORIZED and attempt == 0:
                self._token = None  # expired: one new token, then give up
                continue
            break
        _check(response, f"{method} {path}")
        return response.json() if response.content else None

    def _send(self, method: str, path: str, *, retry: bool, **kwargs: Any) -> httpx.Response:
        """One call; an idempotent one is sent again when the API server did not answer
        in time or dropped the connection (an API server with one worker, on a loaded
        host, can stall for longer than one timeout), or when its metadata database
        failed the call (`_database_error`). Answers, errors included, are the caller's
        to judge: after the last attempt, the last answer."""
        if not retry:
            return self._http.request(method, path, **kwargs)
        retrying = Retrying(
            retry=retry_if_exception_type(httpx.TransportError) | retry_if_result(_database_error),
            stop=stop_after_attempt(_ATTEMPTS),
            wait=wait_exponential(multiplier=1.0, max=5.0),
            before_sleep=lambda state: _log_retry(method, path, state),
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )
        return retrying(self._http.request, method, path, **kwargs)

    def dag_ids(self) -> set[str]:
        """Every DAG the API server knows (parsed and serialized)."""
        found: set[str] = set()
        while True:
            page = self.request("GET", "/api/v2/dags", params={"limit": 100, "offset": len(found)})
            found.update(dag["dag_id"] for dag in page["dags"])
            if not page["dags"] or len(found) >= page["total_entries"]:
                return found

    def import_errors(self) -> list[dict[str, Any]]:
        """DAG files that failed to parse: `filename` and `stack_trace`."""
        return list(self.request("GET", "/api/v2/importErrors")["import_errors"])

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Start a run now (unpausing the DAG first); returns its run id. A conf that
        fails the DAG's Param validation is refused (StackError with HTTP 400)."""
        self.unpause(dag_id)
        run = self.request(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            json={"logical_date": None, "conf": dict(conf or {})},
        )
        return str(run["dag_run_id"])

    def dag_runs(self, dag_id: str = "~", state: str | None = None) -> list[dict[str, Any]]:
        """The runs of `dag_id` (default: of every DAG), of `state` if given, oldest first."""
        params: dict[str, Any] = {"limit": 100, "order_by": "id"}
        if state is not None:
            params["state"] = state
        runs: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET", f"/api/v2/dags/{dag_id}/dagRuns", params={**params, "offset": len(runs)}
            )
            runs += page["dag_runs"]
            if not page["dag_runs"] or len(runs) >= page["total_entries"]:
                return runs

    def run_state(self, dag_id: str, run_id: str) -> str:
        """`queued`, `running`, `success` or `failed`."""
        return str(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
        return list(self.request("GET", path, params={"limit": 100})["task_instances"])

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """One try's log as text."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        content = self.request("GET", path, params={"full_content": True})["content"]
        if isinstance(content, str):
            return content
        return "\n".join(_log_line(entry) for entry in content)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> str:
        """Poll until the run finishes; returns `success` or `failed`. On timeout,
        StackError with the state of every task."""
        deadline = time.monotonic() + timeout
        while (state := self.run_state(dag_id, run_id)) not in FINISHED:
            if time.monotonic() >= deadline:
                tasks = ", ".join(
                    f"{t['task_id']}={t['state']}" for t in self.task_instances(dag_id, run_id)
                )
                raise StackError(
                    f"DAG run {dag_id}/{run_id} is still {state} after {timeout:.0f}s: {tasks}"
                )
            time.sleep(POLL_S)
        return state

    def answer(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        option: str,
        *,
        timeout: float,
        settle_s: float = ANSWER_SETTLE_S,
    ) -> dict[str, Any]:
        """Answer the human-in-the-loop question of task `task_id` (e.g. a failover's
        `approval`: "Approve" or "Reject") once the task has waited for it `settle_s`,
        through the same call as Airflow's Required Actions page (`PATCH
        .../hitlDetails`), as this client's user; returns the recorded answer.
        StackError when the run finishes, or `timeout` passes, before the task asks, or
        when Airflow refuses the answer (HTTP 403: the user is not one of the question's
        assigned users). `settle_s`: see ANSWER_SETTLE_S."""
        started = time.monotonic()
        deadline = started + timeout
        asking_since: float | None = None
        while True:
            state = next(
                (
                    t["state"]
                    for t in self.task_instances(dag_id, run_id)
                    if t["task_id"] == task_id
                ),
                None,
            )
            now = time.monotonic()
            if state not in _ASKING:
                asking_since = None
            elif asking_since is None:
                asking_since = now
            if asking_since is not None and now - asking_since >= settle_s:
                break
            run_state = self.run_state(dag_id, run_id)
            if run_state in FINISHED or now >= deadline:
                raise StackError(
                    f"task {task_id} of DAG run {dag_id}/{run_id} never asked its question "
                    f"(task {state}, run {run_state} after {now - started:.0f}s)"
                )
            time.sleep(POLL_S)
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails"
        try:
            return dict(self.request("PATCH", path, json={"chosen_options": [option]}))
        except StackError as error:
            # A PATCH sent again after a lost answer finds its own answer recorded (409).
            if "HTTP 409" not in str(error):
                raise
            recorded = dict(self.request("GET", path))
            if recorded.get("chosen_options") != [option]:
                raise
            return {**recorded, "responded_by": recorded.get("responded_by_user")}

    def failure_report(self, dag_id: str, run_id: str) -> str:
        """What went wrong in a run: every task's state, then each failed task's log."""
        tasks = self.task_instances(dag_id, run_id)
        lines = [f"DAG run {dag_id}/{run_id}: " + ", ".join(_task_state(t) for t in tasks)]
        for task in tasks:
            if task["state"] in {"failed", "upstream_failed", "up_for_retry"} and task.get(
                "try_number"
            ):
                log = self.task_log(dag_id, run_id, task["task_id"], int(task["try_number"]))
                lines.append(f"--- log of {task['task_id']} (try {task['try_number']})\n{log}")
        return "\n".join(lines)


def _check(response: httpx.Response, call: str) -> None:
    if response.is_error:
        raise StackError(
            f"Airflow API {call} answered HTTP {response.status_code}: {response.text}"
        )


def _database_error(response: httpx.Response) -> bool:
    """Airflow's answer when its metadata database failed a statement of the call (HTTP
    500, reason "Database error"): on the local stack's SQLite, two of the API server's
    requests each waiting for the other's lock until one gave up after 5 s (the browser
    test's approval, beside a task reporting its state). The call's transaction was
    rolled back, so an idempotent call may be sent again."""
    return (
        response.status_code == httpx.codes.INTERNAL_SERVER_ERROR
        and "Database error" in response.text
    )


def _log_retry(method: str, path: str, state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    what = type(error).__name__ if error else "HTTP 500, Database error"
    log.warning(
        "Airflow API %s %s: %s (attempt %d of %d); sending it again",
        method, path, what, state.attempt_number, _ATTEMPTS,
    )  # fmt: skip


def _task_state(task: Mapping[str, Any]) -> str:
    return f"{task['task_id']}={task['state']}"


def _log_line(entry: object) -> str:
    """One structured task-log entry as a line (exceptions with their frames)."""
    if not isinstance(entry, Mapping):
        return str(entry)
    head = " ".join(str(entry[k]) for k in ("timestamp", "level", "event") if entry.get(k))
    extra = {k: v for k, v in entry.items() if k not in _LOG_CONTEXT_KEYS}
    lines = [f"{head} {extra}" if extra else head]
    for error in entry.get("error_detail") or []:
        lines.append(f"  {error.get('exc_type')}: {error.get('exc_value')}")
        lines.extend(
            f"    {frame.get('filename')}:{frame.get('lineno')} in {frame.get('name')}"
            for frame in error.get("frames") or []
        )
    return "\n".join(lines)
