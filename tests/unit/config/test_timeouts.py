"""The consumer group's timeouts are ordered when the configuration loads (issue 26,
point 4): heartbeat.interval.ms < session.timeout.ms <= max.poll.interval.ms, with
librdkafka's defaults where unset. Out of order, librdkafka refused the worker's
consumers only when they were made; now the load says which keys and what to set."""

from __future__ import annotations

import pytest

from replicator.config import load_config
from replicator.errors import ConfigError

_BASE = {
    "clusters": "primary, dr",
    "primary.bootstrap.servers": "localhost:1",
    "dr.bootstrap.servers": "localhost:2",
    "primary->dr.enabled": "true",
}


def test_a_poll_interval_below_the_default_session_timeout_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as refused:
        load_config({**_BASE, "primary->dr.consumer.max.poll.interval.ms": "15000"})
    message = str(refused.value)
    assert "primary->dr.consumer.max.poll.interval.ms=15000" in message
    assert "session.timeout.ms (45000, librdkafka's default)" in message
    assert "Set primary->dr.consumer.session.timeout.ms at or below it (e.g. 10000)" in message


def test_a_session_timeout_above_the_poll_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"primary.consumer.max.poll.interval.ms=20000 is below"):
        load_config(
            {
                **_BASE,
                "primary.consumer.max.poll.interval.ms": "20000",
                "primary.consumer.session.timeout.ms": "30000",
            }
        )


def test_a_heartbeat_not_below_the_session_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"consumer.heartbeat.interval.ms to a third"):
        load_config(
            {
                **_BASE,
                "consumer.session.timeout.ms": "6000",
                "consumer.heartbeat.interval.ms": "6000",
            }
        )


def test_a_short_poll_interval_with_a_shorter_session_loads() -> None:
    """The case of the issue's measurement: 15 s poll interval, 10 s session."""
    config = load_config(
        {
            **_BASE,
            "consumer.max.poll.interval.ms": "15000",
            "consumer.session.timeout.ms": "10000",
        }
    )
    consumer = config.flow("primary->dr").source.consumer
    assert consumer["max.poll.interval.ms"] == "15000"
    assert consumer["session.timeout.ms"] == "10000"


def test_the_group_protocol_consumer_leaves_the_session_to_the_broker() -> None:
    config = load_config(
        {**_BASE, "consumer.group.protocol": "consumer", "consumer.max.poll.interval.ms": "15000"}
    )
    assert config.flow("primary->dr").source.consumer["max.poll.interval.ms"] == "15000"
