"""Session fixtures: the two real local Kafka clusters every integration test uses.

They run on ports of their own (18092, 28092; each further pytest-xdist worker
100 ports on), so a `make run` stack on the default ports can stay up while tests
run, and under `.data/test-stack` (`-gw1`, ...), which each session wipes first
and leaves behind for inspection when tests fail.
`REPLICATOR_TEST_PORTS=P1,P2` and `REPLICATOR_TEST_DATA_DIR` move them, so two
test sessions can run side by side.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.statestore import StateStore
from replicator_lab import ClusterSpec, LocalStack
from replicator_lab.jvm import JVM_OPTIONS_ENV

from helpers.kafka import free_port_pair
from helpers.session import TEST_CLUSTERS, TEST_DATA_DIR

_ROOT = Path(__file__).resolve().parents[1]

#: Helper modules whose fixtures every test may take (`procedure_scene`): a test
#: module that imported a fixture would shadow it with its parameter.
pytest_plugins = ("helpers.procedures", "helpers.postgres", "helpers.secured", "helpers.watchdog")

# py4j's gateway logs "Closing down clientserver connection" at INFO from a finalizer at
# interpreter exit, after pytest closed the stream a test's logging handler writes to;
# the "--- Logging error ---" traceback it prints then sits among real failures.
logging.getLogger("py4j").setLevel(logging.WARNING)

# The tests' brokers and MirrorMaker 2 carry little traffic and start often: the C1
# compiler alone starts a broker in about 40% less CPU (11 s against 7 s here), on a
# machine where the suite's JVMs share two cores. Set before any fixture starts one, and
# inherited by the `replicator stack` subprocesses the tests run.
os.environ.setdefault(JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1")
# The same for the verification's Spark driver (spark-submit's JVM, where local-mode
# executors run too): one verification of test_verify took 115 CPU-s instead of 178.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")

#: The files that take longest, longest first, as measured in `make test`
#: (.data/test-artifacts/junit-parallel.xml of the 2026-12-05 fresh-clone run of
#: `c5681c3`; every file of 30 s or more). They are collected first, so pytest-xdist
#: starts them first and the quick files fill the gaps, instead of one of them running
#: alone at the end (`make test` passes --no-loadscope-reorder: by default xdist orders
#: files by their number of tests). Re-measure and reorder when a file's time changes
#: much (`python` over the junit file: the sum of each file's test times).
_SLOW_FILES = (
    "test_broker_faults.py",
    "test_verify_incremental.py",
    "test_long_outage_workers.py",
    "test_mm2_running.py",
    "test_verify.py",
    "test_secured_stack.py",
    "test_browser.py",
    "test_secured_dags.py",
    "test_estate_failover.py",
    "test_failover.py",
    "test_notifications.py",
    "test_verify_wide.py",
    "test_packaging.py",
    "test_failover_approval.py",
    "test_store_outage.py",
    "test_exactly_once.py",
    "test_mm2_takeover.py",
    "test_unplanned_rpo_markers.py",
    "test_offset_reset.py",
    "test_outage_logging.py",
    "test_scale_out.py",
    "test_forwarded_headers_rate.py",
    "test_verify_after_failback.py",
    "test_estate_checkpoints.py",
    "test_quiet_failures.py",
    "test_consumer_group_lag.py",
    "test_topic_sync_live.py",
    "test_airflow_dags.py",
    "test_abort_race.py",
    "test_secured_verification.py",
    "test_translation.py",
    "test_failure_policies.py",
    "test_compiled_exactly_once.py",
    "test_forwarded_provenance.py",
    "test_prometheus_scrape.py",
    "test_compiled_path.py",
    "test_frozen_step.py",
    "test_drill.py",
    "test_acl_sync_live.py",
    "test_init.py",
    "test_pause_resume.py",
    "test_crash_resume.py",
)


_INTEGRATION = Path(__file__).resolve().parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return _SLOW_FILES.index(name) if name in _SLOW_FILES else len(_SLOW_FILES)

    items.sort(key=rank)  # stable: the order within a file is kept
    # Everything under tests/integration/ needs a real server (Kafka, PostgreSQL, Airflow's
    # API server, Spark, Docker, Chromium): `pytest -m "not integration"` runs the rest.
    for item in items:
        if item.path.is_relative_to(_INTEGRATION):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def kafka_stack() -> Iterator[LocalStack]:
    """Both clusters, started once per session with the same code as `replicator stack up`."""
    stack = LocalStack(TEST_CLUSTERS, data_dir=TEST_DATA_DIR)
    stack.down(wipe=True)  # whatever an interrupted session left behind
    stack.up(timeout=120)
    yield stack
    stack.down()


@pytest.fixture(scope="session")
def primary(kafka_stack: LocalStack) -> str:
    """Bootstrap address of the `primary` test cluster."""
    return kafka_stack.bootstrap("primary")


@pytest.fixture(scope="session")
def dr(kafka_stack: LocalStack) -> str:
    """Bootstrap address of the `dr` test cluster."""
    return kafka_stack.bootstrap("dr")


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One Airflow metadata DB for the session's `dag.test()` runs. Airflow reads its
    settings when first imported, so the environment is set before that, once."""
    home = tmp_path_factory.mktemp("airflow")
    settings = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
    }
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    from airflow.utils.db import initdb  # noqa: PLC0415 - only after the environment is set

    initdb()
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def lone_primary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A primary cluster of the module's own, to be stopped (an outage) without
    harming other tests."""
    stack = LocalStack(
        [ClusterSpec("primary", free_port_pair())], data_dir=tmp_path_factory.mktemp("lone")
    )
    stack.up(timeout=120)
    yield stack
    stack.down(wipe=True)


@pytest.fixture
def state_url(tmp_path: Path) -> str:
    """A DR state store of the test's own (SQLite)."""
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def store(state_url: str) -> Iterator[StateStore]:
    state = StateStore(state_url)
    yield state
    state.close()
