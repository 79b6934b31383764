"""A planned failover's orchestrator, in a process of its own, that freezes itself
(SIGSTOP: a long GC pause, a stopped VM) at the worst moment: inside the `switch`
step, just before the store's write that moves the application.

    python tests/helpers/frozen_step.py CONFIG STATE_URL FLOW APP PROCEDURE_ID MARKER

Writes its pid to MARKER, stops itself, and once continued (SIGCONT) goes on to the
write. It runs the steps from preflight to switch; the first that fails ends it with
exit status 1 and its error on stdout (`tests/integration/procedures/test_frozen_step.py`).
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path

from replicator.config import load_config
from replicator.procedures import Failover
from replicator.statestore import StateStore
from replicator.statestore.applications import ApplicationStore

#: The failover's leases last this long unless renewed; its waits are bounded below it.
LEASE_TTL_S = 12.0
TIMEOUT_S = 10.0
STEPS = ("preflight", "fence", "drain", "stop_flow", "commit_offsets", "switch")


def main(config: str, state_url: str, flow: str, app: str, procedure_id: str, marker: str) -> int:
    switch = ApplicationStore.switch

    def frozen_switch(self: ApplicationStore, name: str, cluster: str) -> object:
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGSTOP)  # every thread of the process stops here
        return switch(self, name, cluster)

    ApplicationStore.switch = frozen_switch  # type: ignore[method-assign]
    store = StateStore(state_url)
    failover = Failover(load_config(config), flow, [app], store, timeout_s=TIMEOUT_S)
    failover.lease_ttl_s = LEASE_TTL_S
    try:
        for step in STEPS:
            outcome = failover.run_step(procedure_id, step)
            sys.stdout.write(f"step {step}: {outcome.status}\n")
    except Exception:
        sys.stdout.write(traceback.format_exc())
        return 1
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
