"""`replicator init`'s verdict and exit status: ready (0), a real problem (1), partial
when only clusters that did not answer are wrong (3, or 0 with --allow-unreachable);
and which failures of the first request mean "did not answer" (an outage) and which
"refuses the client" (a configuration to fix)."""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from replicator.config.model import ClusterConfig
from replicator.init import clusters
from replicator.init.report import EXIT_NOT_READY, EXIT_PARTIAL, EXIT_READY, InitReport


def _report(*outcomes: tuple[str | None, str]) -> InitReport:
    report = InitReport(dry_run=False)
    for cluster, outcome in outcomes:
        report.add("clusters", cluster, outcome, f"{cluster} {outcome}")
    return report


def test_ready() -> None:
    report = _report(("a", "ok"), ("b", "ok"), (None, "done"))
    assert report.ready and not report.partial and report.verdict == "ready"
    assert report.exit_status() == EXIT_READY == 0
    assert report.summary().startswith("ready: ")


def test_partial_when_only_unreachable_clusters_are_wrong() -> None:
    report = _report(("a", "ok"), ("b", "unreachable"), (None, "done"))
    assert not report.ready and report.partial and report.verdict == "partial"
    assert report.unreachable == ["b"]
    assert report.exit_status() == EXIT_PARTIAL == 3
    assert report.exit_status(allow_unreachable=True) == 0
    summary = report.summary()
    assert summary.startswith("PARTIAL: ") and "did not answer: b" in summary, summary
    data = report.as_json()
    assert (data["ready"], data["verdict"], data["unreachable"]) == (False, "partial", ["b"])


@pytest.mark.parametrize("problem", ["failed", "missing"])
def test_a_real_problem_fails_whatever_else(problem: str) -> None:
    report = _report(("a", problem), ("b", "unreachable"))
    assert not report.ready and not report.partial and report.verdict == "not ready"
    assert report.exit_status() == EXIT_NOT_READY == 1
    assert report.exit_status(allow_unreachable=True) == 1
    assert report.summary().startswith("NOT ready: ")


class _Failing:
    """An admin client whose describe_cluster fails with `exc`, its error callback
    having been given `reported` (served by `poll`)."""

    def __init__(self, exc: BaseException, reported: list[KafkaError], settings: dict) -> None:
        self._exc, self._reported, self._settings = exc, reported, settings

    def describe_cluster(self, **_: object) -> _Failing:
        return self

    def result(self, timeout: float) -> None:
        raise self._exc

    def poll(self, timeout: float) -> int:
        for error in self._reported:
            self._settings["error_cb"](error)
        return len(self._reported)


def _check(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, reported: list[KafkaError]
) -> InitReport:
    def admin_for(cluster: ClusterConfig, settings: dict) -> _Failing:
        return _Failing(exc, reported, settings)

    monkeypatch.setattr(clusters, "admin_for", admin_for)

    config = SimpleNamespace(
        clusters={"dr": ClusterConfig(alias="dr", bootstrap_servers="dr-kafka:9093")}
    )
    report = InitReport(dry_run=False)
    assert clusters.check_clusters(config, report) == {}  # type: ignore[arg-type]
    return report


TIMED_OUT = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for controller"))


@pytest.mark.parametrize(
    "exc",
    [
        TIMED_OUT,
        KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused")),
        FutureTimeout(),
    ],
    ids=["timed-out", "transport", "future-timeout"],
)
def test_no_answer_is_unreachable_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    [finding] = _check(monkeypatch, exc, []).findings
    assert (finding.cluster, finding.outcome) == ("dr", "unreachable")
    assert finding.text.startswith("dr-kafka:9093 does not answer: "), finding.text
    assert "If dr is down, nothing to fix" in finding.text
    assert "check dr.bootstrap.servers" in finding.text


@pytest.mark.parametrize(
    ("exc", "reported", "cause"),
    [
        (
            TIMED_OUT,
            [KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid")],
            "_AUTHENTICATION: SASL authentication error: invalid",
        ),
        (
            TIMED_OUT,
            [KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed")],
            "_SSL: SSL handshake failed",
        ),
        (
            KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "denied")),
            [],
            "denied",
        ),
    ],
    ids=["authentication", "tls", "authorization"],
)
def test_a_refusal_fails(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, reported: list[KafkaError], cause: str
) -> None:
    [finding] = _check(monkeypatch, exc, reported).findings
    assert (finding.cluster, finding.outcome) == ("dr", "failed")
    assert finding.text.startswith("dr-kafka:9093 refuses the client: "), finding.text
    assert cause in finding.text
    assert "check dr.security.protocol" in finding.text
