"""Group coordinators that are still loading or moving.

A cluster that just started creates and loads `__consumer_offsets` first, and a broker
that restarts hands its groups to another: for a while their coordinator answers
describe and offset calls with one of `SETTLING`. A caller raises `NotSettled` for
those (`settling`) and `until_settled` asks again with a short exponential pause,
for at most the time it allows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from confluent_kafka import KafkaError
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from replicator.errors import ReplicatorError
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
