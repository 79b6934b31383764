"""Group coordinators that are still loading or moving, and how to ask them safely.

A cluster that just started creates and loads `__consumer_offsets` first, and a broker
that restarts hands its groups to another: for a while their coordinator answers
describe and offset calls with one of `SETTLING`. A caller raises `NotSettled` for
those (`settling`) and `until_settled` asks again with a short exponential pause,
for at most the time it allows.

Coordinator-bound admin requests are sent with the request timeout `UNEXPIRED_S` (a
shorter one can take the process down: see there), and `ask_coordinator` has a cluster
locate a group's coordinator without any admin request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from confluent_kafka import KafkaError, TopicPartition
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer
from replicator.kafka.errors import error_code

SETTLING = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)

#: The pause between two asks (tests set it to none).
WAIT = wait_exponential(multiplier=0.2, max=2.0)

P = ParamSpec("P")
T = TypeVar("T")


class NotSettled(ReplicatorError):
    """The group coordinator is still loading or moving; asking again will do."""


def settling(exc: BaseException) -> bool:
    """Whether `exc` is a coordinator still loading or moving."""
    return error_code(exc) in SETTLING


def until_settled(within_s: float, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`call(*args, **kwargs)`, asked again while it raises NotSettled, for at most
    `within_s`; the last NotSettled after that."""
    retrying = Retrying(
        retry=retry_if_exception_type(NotSettled),
        wait=WAIT,
        stop=stop_after_delay(within_s),
        reraise=True,
    )
    return retrying(call, *args, **kwargs)


#: The request timeout of every coordinator-bound admin request (DescribeConsumerGroups,
#: DeleteConsumerGroups): librdkafka's longest. librdkafka 2.16 aborts the process when
#: such a request times out before the group's coordinator answered and the coordinator
#: answers later (assertion `eonce->refcnt > 0` in rd_kafka_enq_once_del_source_return;
#: librdkafka issue #4605, fix proposed in pull request #5397): a describe with a 1 s
#: timeout, sent while a fresh target created its offsets topic, took `replicator run`
#: down at 5,000 partitions, and a 10 ms timeout does it on any cluster. So such a
#: request never times out inside librdkafka while the process lives; the caller waits
#: for its future with a timeout of its own (a request still unanswered when its client
#: goes is dropped safely). A process that lives long (`replicator run`) sends none:
#: it reads group states with ListGroups and locates coordinators with
#: `ask_coordinator`.
UNEXPIRED_S = 3600.0


#: The partition whose committed offset `ask_coordinator` asks for: any answer will do.
PROBE = ("__replicator-coordinator-probe", 0)


def ask_coordinator(cluster: ClusterConfig, group: str, timeout_s: float) -> None:
    """Returns once `group`'s coordinator on `cluster` answered an offset fetch from a
    consumer of the group (which never joins it), whatever it said about the partition
    asked (`PROBE`, which the principal may not even see): the coordinator is located
    and loaded, and a cluster without an offsets topic created it on the way (the
    fetch asks for the coordinator at once). KafkaException for what the group itself
    got: not authorized, or no answer within `timeout_s`."""
    consumer = Consumer(
        {**cluster.consumer, "group.id": group, "enable.auto.commit": False},
        cluster=cluster.alias,
    )
    try:
        consumer.committed([TopicPartition(*PROBE)], timeout=timeout_s)
    finally:
        consumer.close()
