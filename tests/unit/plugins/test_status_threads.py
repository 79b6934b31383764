"""The DR status page shows the health of `replicator run`'s background threads
(flow states, checkpoints, ACL sync), as the runner published it (issue 26, point 7)."""

from __future__ import annotations

import re
import time
from dataclasses import replace

from replicator_airflow.status_render import render_status
from test_status_render import _estate, _overview

from replicator.flow_timer import ThreadHealth
from replicator.operations.dr_status import BackgroundInfo
from replicator.operations.thread_status import RunnerThreads


def _runner(*threads: ThreadHealth, age_s: float = 0.0) -> RunnerThreads:
    return RunnerThreads("primary->dr", "host:42", list(threads), int((time.time() - age_s) * 1000))


def test_a_runner_is_ok_failing_or_silent_and_says_why() -> None:
    ok = ThreadHealth("checkpoints", "ok")
    failing = ThreadHealth(
        "flow-states", "failing", "flow-states: state store x unavailable", 1_780_000_000_000
    )
    assert _runner(ok).state == "ok"
    assert _runner(ok).summary() == "checkpoints=ok"
    assert _runner(ok, failing).state == "failing"
    assert "flow-states=failing since 2026-05-28" in _runner(ok, failing).summary()
    assert "(flow-states: state store x unavailable)" in _runner(ok, failing).summary()
    assert _runner(ok, ThreadHealth("acl-sync", "dead", restarts=2)).state == "failing"
    assert (
        "acl-sync=dead, restarted 2x"
        in _runner(ThreadHealth("acl-sync", "dead", restarts=2)).summary()
    )
    assert _runner(ok, age_s=120).state == "silent"
    assert "SILENT since" in _runner(ok, age_s=120).summary()


def test_the_page_shows_each_runners_threads_escaped() -> None:
    failing = BackgroundInfo("host:42", "failing", "flow-states=failing (store <down>)")
    html = render_status(_overview(replace(_estate(1, 1), background=[failing])))
    found = re.search(r'<div class="background-threads bad"[^>]*>(.*?)</div>', html, flags=re.S)
    assert found is not None, "no line for the runner's threads"
    assert found.group(1) == (
        "background threads of host:42: failing &middot; flow-states=failing (store &lt;down&gt;)"
    )
    assert 'data-threads="failing"' in html
    quiet = render_status(_overview(_estate(1, 1)))
    assert "background-threads" not in quiet
