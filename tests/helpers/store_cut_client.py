"""Run a demo client (include/demo) whose state store calls fail while a file exists:
a client cut off from the state store but not from Kafka
(tests/integration/procedures/test_fence_lease.py).

    python tests/helpers/store_cut_client.py CUT_FILE producer ARGS...

Every transaction of the client's `StateStore` raises StoreUnavailable, as an
unreachable database does, for as long as CUT_FILE exists.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection

from replicator.statestore import StoreUnavailable
from replicator.statestore.database import Database
from replicator_lab.demo_apps import DEMO_DIR


def main() -> None:
    cut, role, *args = sys.argv[1:]
    reachable = Database._transaction

    @contextmanager
    def transaction(store: Database, write: bool) -> Iterator[Connection]:
        if Path(cut).exists():
            raise StoreUnavailable(f"state store {store} is unavailable: cut off ({cut} exists)")
        with reachable(store, write) as conn:
            yield conn

    Database._transaction = transaction  # type: ignore[method-assign]
    script = DEMO_DIR / f"{role}.py"
    sys.path.insert(0, str(DEMO_DIR))  # as running the script itself would
    sys.argv = [str(script), *args]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
