"""A step frozen past its lease changes nothing when it wakes (issue 46 point 2).

A planned failover's orchestrator, a process of its own, is stopped by SIGSTOP inside
its `switch` step just before the write that moves the application (a long GC, a
stopped VM). Its leases lapse; an operator aborts the run: the abort takes the run's
lease (a new fencing token), unfences the application on the primary and starts the
flow again. Then the orchestrator is continued: its switch is refused in the store's
own transaction (the lease it took is no longer its), it says so, and the application
stays on the primary, unfenced, the flow running, the run aborted. Without fencing
tokens the woken step moved the application to DR behind the abort's back.

Real clusters and a real `replicator run` (in a thread), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from replicator.procedures.abort import abort
from replicator.statestore import StateStore
from replicator.statestore.flow_states import RUNNING

from helpers import frozen_step
from helpers.procedures import SceneMaker
from helpers.replication import wait_until

pytestmark = pytest.mark.integration

_HELPERS = Path(__file__).resolve().parents[2] / "helpers"


@pytest.fixture
def state_url(backend_state_url: str) -> str:
    """The state store of each test: a SQLite file, then a PostgreSQL database."""
    return backend_state_url


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def test_a_step_frozen_past_its_lease_changes_nothing_after_an_abort(
    tmp_path: Path, procedure_scene: SceneMaker, store: StateStore
) -> None:
    scene = procedure_scene("frozen", partitions=2, records=200, offsets={0: 50, 1: 50})
    app, procedure_id = scene.app, f"failover-frozen-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "frozen.pid"
    with scene.running():
        orchestrator = subprocess.Popen(
            [
                sys.executable,
                str(_HELPERS / "frozen_step.py"),
                str(scene.config_path),
                scene.state_url,
                "primary->dr",
                app,
                procedure_id,
                str(marker),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            wait_until(
                lambda: marker.exists() or orchestrator.poll() is not None,
                180,
                "the orchestrator reaching the switch",
            )
            assert orchestrator.poll() is None, orchestrator.communicate()[0].decode()
            wait_until(lambda: _stopped(orchestrator.pid), 30, "the orchestrator frozen")
            frozen = store.applications.get(app)
            assert (frozen.active_cluster, frozen.fenced) == ("primary", True)

            time.sleep(frozen_step.LEASE_TTL_S + 1)  # frozen past every lease it holds
            report = abort(store, procedure_id, reason="the orchestrator froze mid-switch")
            assert report.outcome == "aborted"
            assert report.restarted_flows == ["primary->dr"]
            undone = store.applications.get(app)
            assert (undone.active_cluster, undone.fenced) == ("primary", False)

            os.kill(orchestrator.pid, signal.SIGCONT)  # it wakes and goes on to its write
            output, _ = orchestrator.communicate(timeout=120)
        finally:
            if orchestrator.poll() is None:
                os.kill(orchestrator.pid, signal.SIGCONT)
                orchestrator.kill()
                orchestrator.wait()
    text = output.decode()
    assert orchestrator.returncode == 1, text
    assert f"switching application {app!r} to 'dr' refused, nothing was written" in text, text
    # The lease it names is one the abort took or released: the run's, or the
    # application's (released with the run's leases when the abort ended it).
    assert re.search(
        rf"the lease on '(run|application) [^']+' that {re.escape(procedure_id)}.*? took "
        r"(was released|is now held by abort of)",
        text,
    ), text
    after = store.applications.get(app)
    assert after == undone, "the woken step changed the application"
    state = store.flows.get("primary->dr")
    assert state is not None and state.state == RUNNING, "the flow the abort started stopped"
    [run] = store.runs.recent("failover")
    assert run.outcome == "aborted"
    switched = store.runs.step(procedure_id, "switch")
    assert switched is None or switched.state != "done"
