"""A client process whose host clock is behind the others': it reports itself to
the state store as a client of APP, "running" at epoch 0, once, then goes silent
(cut off, as a client that lost the store), printing the real time of its report
(tests/integration/procedures/test_fence_clock.py).

    python tests/helpers/skewed_clock_client.py STATE_URL APP CLIENT_ID BEHIND_S

Every time this process's code takes from its clock (`database.now()`, the clock
the store stamps rows with) is BEHIND_S seconds behind the real time.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta

from replicator.statestore import StateStore, database


def main() -> None:
    url, app, client_id, behind_s = sys.argv[1:]
    skew = timedelta(seconds=float(behind_s))
    database.now = lambda: datetime.now(UTC) - skew  # this host's clock is behind
    store = StateStore(url)
    try:
        store.applications.report_client(app, client_id, "producer", "primary", 0, "running")
        sys.stdout.write(f"reported at {time.time()}\n")
    finally:
        store.close()


if __name__ == "__main__":
    main()
