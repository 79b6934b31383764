"""`replicator verify`: plan, run the Spark job, run the suites, store the summary.

The Spark job (`replicator_spark.verify`) and the suites
(`replicator_expectations.report`), packages of the same distribution
(`replicator.verification.job` finds them), run as subprocesses, so `replicator`
itself never imports Spark or GX. Each run's
plan, tables, summary and Data Docs are under `<results>/run=<run id>/`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.errors import ReplicatorError
from replicator.statestore import StateStore
from replicator.statestore.records import VerifiedRange
from replicator.statestore.runs import RunStore
from replicator.statestore.verified import VerifiedRangeStore
from replicator.verification.access import check_access
from replicator.verification.driver_jvm import driver_conf
from replicator.verification.incremental import SAMPLE_PERIOD, Window, proved
from replicator.verification.jars import jvm_dir
from replicator.verification.job import JOB_AHEAD, py_files, spark_application
from replicator.verification.kafka_options import shipped_names, tls_files
from replicator.verification.plan import Sampling, VerificationPlan, plan_verification
from replicator.verification.processes import Ahead, check_exit, run_process
from replicator.verification.server import (
    check_reachable,
    client_command,
    client_environment,
    is_remote,
    server_address,
)
from replicator.verification.submit import SparkSubmit
from replicator.verification.warm_suites import suites_for

#: Relative to the working directory, like the JVM jars (`$REPLICATOR_JVM_DIR`, else
#: `.cache/jvm`): a checkout's root under `make run`, `/opt/replicator` in the image.
DEFAULT_RESULTS = Path(".data") / "verification"
#: The runs of the history searched for a flow's previous verification.
_RUNS_SEARCHED = 500


@dataclass(frozen=True)
class Verification:
    """One run's outcome: where its files are and what the suites said."""

    run_id: str
    directory: Path
    success: bool
    summary: dict[str, Any]


@dataclass(frozen=True)
class VerificationRun:
    """A started run: its id in the history, its folder, what its plan left in flight."""

    run_id: str
    directory: Path
    flow: str
    in_flight: int
    #: Truststores and keystores the job ships to the executors (`spark-submit --files`).
    shipped: list[str] = field(default_factory=list)

    @property
    def plan(self) -> Path:
        return self.directory / "plan.json"


def verify(
    flow: FlowConfig,
    store: StateStore,
    *,
    topics: list[str] | None = None,
    master: str = "local[2]",
    results: Path = DEFAULT_RESULTS,
    thresholds: Path | None = None,
    config_file: Path | None = None,
    ship_files: bool | None = None,
    full: bool = False,
    sample_period: timedelta = SAMPLE_PERIOD,
) -> Verification:
    """Verify `flow`'s copy (all its topics, or `topics`) and record the run: the
    phases below in one go (the Airflow DAG runs them as separate tasks)."""
    with ExitStack() as ahead:
        suites = ahead.enter_context(suites_for(master, thresholds))
        job = ahead.enter_context(JobAhead(master)) if is_remote(master) else None
        run = start(
            flow,
            store,
            topics=topics,
            master=master,
            results=results,
            config_file=config_file,
            ship_files=ship_files,
            full=full,
            sample_period=sample_period,
        )
        try:
            began = time.monotonic()
            if not records_to_read(run.plan):
                # Nothing new since the last run, on either side: no job (its client
                # stops now, not to take the suites' cores); the suites take the
                # plan's tables (lag and retention as planned).
                if job is not None:
                    job.close()
            elif job is not None:
                job.run(run.directory)
            else:
                run_spark(spark_job(run, master))
            spark_s = time.monotonic() - began
            summary = suites.run(run.directory)
            summary["seconds"] = {
                "spark": round(spark_s, 1),
                "suites": round(time.monotonic() - began - spark_s, 1),
            }
        except ReplicatorError as exc:
            store.runs.finish(run.run_id, "failed", None, None, {"error": str(exc)})
            raise
    return finish(store, run, summary)


def start(
    flow: FlowConfig,
    store: StateStore,
    *,
    topics: list[str] | None = None,
    master: str = "local[2]",
    results: Path = DEFAULT_RESULTS,
    config_file: Path | None = None,
    ship_files: bool | None = None,
    connection: Mapping[str, str] | None = None,
    full: bool = False,
    sample_period: timedelta = SAMPLE_PERIOD,
) -> VerificationRun:
    """Check the principal may read what the job reads (`access`: Spark's own
    error would not say which ACL is missing) while planning the run
    (`replicator.verification.plan`), start it in the history, and write the plan
    into the run's folder. `config_file`: the configuration `flow` comes from,
    whose security settings the job uses (none: PLAINTEXT); `connection`: the
    secrets its `${conn:NAME}` references resolve to. `ship_files`: ship its
    truststores and keystores to the executors (default: unless `master` is local or a
    verification server, which read them where they are).
    Each partition's window starts after what earlier runs verified
    (`incremental`), and a share of what they verified is re-read so that all of
    it is within `sample_period`; `full`: from the source's log start, everything
    again."""
    verified, sampling = None, None
    if not full:
        verified = store.verified.ranges(flow.name)
        sampling = Sampling(datetime.now(UTC), _last_run(store.runs, flow.name), sample_period)
    # The access check and the plan ask the brokers at once (a run with nothing new is
    # mostly these two); a missing ACL is the error told, whatever the plan met.
    with ThreadPoolExecutor(1, thread_name_prefix="access-check") as pool:
        access = pool.submit(check_access, flow, topics)
        try:
            plan = plan_verification(flow, topics, verified, sampling)
        except Exception:
            access.result()
            raise
        access.result()
    shipped: list[str] = []
    if config_file is not None:
        # A local job and a server read the files where they are.
        local = master.startswith("local") or is_remote(master)
        ship = not local if ship_files is None else ship_files
        files = tls_files(load_config(config_file, connection=connection)) if ship else []
        shipped_names(files)  # a clash of names fails here, before anything starts
        shipped = [str(path) for path in files]
        plan = replace(plan, config_file=str(config_file.resolve()), ship_files=bool(files))
    if not plan.windows:
        raise ReplicatorError(
            f"flow {flow.name} replicates none of {topics or 'its topics'}; "
            "check --topics against `replicator topics`"
        )
    run_id = store.runs.start(
        "verification",
        flow.name,
        None,
        {
            "topics": topics,
            "master": server_address(master) if is_remote(master) else master,
            "full": full,
        },
    )
    directory = (results / f"run={run_id}").resolve()
    directory.mkdir(parents=True, exist_ok=True)
    in_flight = sum(w.in_flight for w in plan.windows)
    run = VerificationRun(run_id, directory, flow.name, in_flight, shipped)
    plan.write(run.plan)
    return run


def _last_run(store: RunStore, flow: str) -> datetime | None:
    """When the flow's previous verification started (None: it has none)."""
    for run in store.recent("verification", limit=_RUNS_SEARCHED):
        if run.flow == flow:
            return run.started_at
    return None


def spark_job(run: VerificationRun, master: str = "local[2]") -> SparkSubmit:
    """The Spark job of a run, for `run_spark` or Airflow's SparkSubmitOperator."""
    conf = {"spark.ui.enabled": "false", **driver_conf(master, records_to_read(run.plan))}
    return SparkSubmit(
        spark_application(),
        ["--plan", str(run.plan), "--out", str(run.directory)],
        master=master,
        jars=sorted((jvm_dir() / "spark-kafka").glob("*.jar")),
        py_files=[py_files(run.directory)],
        conf=conf,
        name=f"verify {run.flow}",
        files=[Path(path) for path in run.shipped],
    )


def records_to_read(plan: Path) -> int:
    """The records the job of `plan` (its plan.json) reads from the windows, both sides,
    and the samples: none, and there is no job to run (the suites take the plan's tables)."""
    read = VerificationPlan.read(plan)
    windows = sum(
        w.source_end - w.source_start + w.target_end - w.target_start for w in read.windows
    )
    return windows + sum(r.target_end - r.target_first for r in read.samples)


def run_spark(submit: SparkSubmit) -> None:
    """spark-submit from this Python environment, in the run's folder; its output
    goes to `spark.log`. Shipped files are named there too (`shipped_links`)."""
    out = Path(submit.arguments[submit.arguments.index("--out") + 1])
    spark_submit = str(Path(sys.executable).with_name("spark-submit"))
    with shipped_links(out, submit.files):
        run_process(submit.command(spark_submit), "the Spark verification job", out / "spark.log")


def run_on_server(
    directory: Path, remote: str, environment: Mapping[str, str] | None = None
) -> None:
    """The job of the run in `directory` as a client of the verification server at
    `remote` (`server`), with `environment` added to its own (the connection's secrets
    in Airflow); its output goes to `spark.log` there, as `run_spark`'s does."""
    check_reachable(remote)
    what = f"the Spark verification job (on {server_address(remote)})"
    command = [*client_command(), *_job_arguments(directory)]
    env = {**(environment or {}), **client_environment(remote)}
    run_process(command, what, directory / "spark.log", env=env)


def _job_arguments(directory: Path) -> list[str]:
    return ["--plan", str(directory / "plan.json"), "--out", str(directory)]


@contextmanager
def shipped_links(directory: Path, files: list[Path]) -> Iterator[None]:
    """Links in `directory` to the shipped `files`, under the names the executors
    find them by in their working directories (`shipped_names`), for the length of
    the `with`. The connector gives the driver and the executors one path, and in
    client mode the driver runs in spark-submit's working directory (not in
    Spark's files folder): a spark-submit started in `directory` finds the same
    names. Links, not copies: no key is written anywhere, nothing is left behind."""
    links = [directory / name for name in shipped_names(files).values()]
    for link, target in zip(links, files, strict=True):
        link.unlink(missing_ok=True)
        link.symlink_to(target.resolve())
    try:
        yield
    finally:
        for link in links:
            link.unlink(missing_ok=True)


def finish(store: StateStore, run: VerificationRun, summary: dict[str, Any]) -> Verification:
    """Store the ranges the run proved (`incremental.proved`) and record the suites'
    verdict in the history (RPO = records in flight), with what the run verified
    anew and what earlier runs had."""
    plan = VerificationPlan.read(run.plan)
    summary = {**summary, "verified": record_proved(store.verified, plan, run)}
    outcome = "succeeded" if summary["success"] else "failed"
    details = {**summary, "results": str(run.directory)}
    store.runs.finish(run.run_id, outcome, run.in_flight, None, details)
    return Verification(run.run_id, run.directory, bool(summary["success"]), summary)


def record_proved(
    store: VerifiedRangeStore, plan: VerificationPlan, run: VerificationRun
) -> dict[str, Any]:
    """Write the verified ranges of every partition the run changed: the ranges still
    standing from earlier runs, then those this run proved (from the job's
    `digests.json`); a partition verified whole has its earlier ranges forgotten."""
    rows = _job_rows(run.directory / "digests.json")
    sampled = _job_rows(run.directory / "samples.json")
    # Re-read ranges: checked now when they hold what was proved; one that does not
    # is dropped with the ranges after it (the next run verifies from there again).
    checked = {(r["topic"], r["partition"], r["source_first"]) for r in sampled if r["matches"]}
    broken: dict[tuple[str, int], int] = {}
    for r in sampled:
        if not r["matches"]:
            key = (r["topic"], r["partition"])
            broken[key] = min(broken.get(key, r["source_first"]), r["source_first"])
    by_partition: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        by_partition.setdefault((row["topic"], row["partition"]), []).append(row)
    stored: dict[tuple[str, int], list[VerifiedRange]] = {}
    for verified in store.ranges(plan.flow):
        stored.setdefault((verified.topic, verified.partition), []).append(verified)
    now = datetime.now(UTC)
    changed: dict[tuple[str, int], list[VerifiedRange]] = {}
    records_now = 0
    for w in plan.windows:
        key = (w.topic, w.partition)
        before = stored.get(key, [])
        # The ranges the plan started after (none when it verified the partition whole).
        standing = [
            replace(r, checked_at=now) if (*key, r.source_first) in checked else r
            for r in before
            if 0 <= w.prior_start <= r.source_first < w.source_start
        ]
        window = Window(
            plan.flow, w.topic, w.partition, w.remote_topic, w.remote_topic_id,
            w.source_start, w.source_end,
        )  # fmt: skip
        new = proved(
            window,
            by_partition.get(key, []),
            standing,
            range_offsets=plan.range_offsets,
            run_id=run.run_id,
            now=now,
        )
        records_now += sum(int(row["records"]) for row in by_partition.get(key, []))
        replaced = {r.source_first for r in new}
        after = [r for r in standing if r.source_first not in replaced] + new
        if key in broken:
            after = [r for r in after if r.source_first < broken[key]]
        if sorted(after, key=_first) != sorted(before, key=_first):
            changed[key] = after
    store.replace(plan.flow, changed)
    return {
        "incremental": plan.incremental,
        "records_now": records_now,
        "records_before": sum(w.verified_before for w in plan.windows),
        "reverified": {
            f"{w.topic}[{w.partition}]": w.reverified for w in plan.windows if w.reverified
        },
        "sampled_ranges": len(sampled),
        "sampled_records": sum(int(r["records"]) for r in sampled),
        "sampled_differing": [
            f"{r['topic']}[{r['partition']}] {r['source_first']}..{r['source_end'] - 1}"
            for r in sampled
            if not r["matches"]
        ],
    }


def _job_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a table the job wrote as JSON for the finish (none without a job)."""
    return json.loads(path.read_text()) if path.exists() else []


def _first(r: VerifiedRange) -> int:
    return r.source_first


def run_suites(
    directory: Path, thresholds: Path | None = None, master: str | None = None
) -> dict[str, Any]:
    """The GX suites over the run's tables: on the verification server `master` names,
    when it keeps them warm (`warm_suites`), else in a process of their own (no GX
    import here)."""
    with suites_for(master, thresholds) as suites:
        return suites.run(directory)


class JobAhead:
    """The Spark job as a verification server's client, ahead (`Ahead`): its import of
    PySpark and its session with the server (about 1 s) overlap the planning; `run`
    hands it the run's plan and folder, as `run_on_server` does. A server that does not
    answer fails the run before it is planned."""

    def __init__(self, remote: str) -> None:
        check_reachable(remote)
        self._process = Ahead([*client_command(), JOB_AHEAD], client_environment(remote))
        self._where = server_address(remote)

    def run(self, directory: Path) -> None:
        log = directory / "spark.log"
        code = self._process.ask(_job_arguments(directory), log)
        check_exit(code, f"the Spark verification job (on {self._where})", log, failing_ok=False)

    def close(self) -> None:
        """Stop it unless it ran (a run with no job)."""
        self._process.close()

    def __enter__(self) -> JobAhead:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
