"""Demo producer: writes uniquely identified records to the active cluster and keeps a
ledger of every record the broker acknowledged, following fences and failovers.

    .venv/bin/python include/demo/producer.py --config FILE --app NAME \\
        --topic demo.orders --ledger PATH [--rate N] [--state-url URL]

See include/demo/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import time

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from fenced_client import REFUSED, FencedClient, access_denied, main

from replicator.statestore import Route
from replicator.statestore.ledger import LedgerEntry

log = logging.getLogger("demo")

_POLL_S = 0.1
_KEYS = 32
#: Delivery reports of records `disconnect` cancelled (it logs them once, in sum) or
#: that failed with the producer (the error that stops the client says why, once).
_UNSENT = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT, KafkaError._FATAL})


class DemoProducer(FencedClient):
    """Idempotent producer of `--rate` records per second to the logical topic on
    whichever cluster is active; the topic is a local topic there."""

    role = "producer"

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.rate: float = args.rate
        self.sequence = 0
        self._producer: Producer | None = None
        self._cluster = ""
        self._since = 0.0
        self._sent = 0

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--rate", type=float, default=20.0, help="records per second")

    def connect(self, route: Route) -> None:
        # The cluster's own producer settings carry its security configuration.
        settings = {
            **self.config.clusters[route.cluster].producer,
            "enable.idempotence": True,
            "client.id": self.client_id,
            "linger.ms": 5,
        }
        self._producer = Producer(settings)
        self._cluster = route.cluster
        self._since, self._sent = time.monotonic(), 0

    def work(self) -> None:
        try:
            self._produce_due()
        except KafkaException as exc:
            error = exc.args[0]
            # An idempotent producer without WRITE on any topic is refused its producer
            # id: the broker says CLUSTER_AUTHORIZATION_FAILED, but WRITE is what it lacks.
            if error.code() in {*REFUSED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}:
                raise access_denied(
                    self, self._cluster, error, "WRITE", f"TOPIC {self.topic}"
                ) from exc
            raise
        self.ledger.flush()

    def _produce_due(self) -> None:
        """Produce the records due at `--rate` since connecting, and serve reports."""
        producer = self._live()
        due = int((time.monotonic() - self._since) * self.rate)
        while self._sent < due:
            record_id = f"{self.application}-{self.client_id}-{self.sequence}"
            value = json.dumps({"id": record_id, "seq": self.sequence}).encode()
            try:
                producer.produce(
                    self.topic,
                    key=f"key-{self.sequence % _KEYS}".encode(),
                    value=value,
                    on_delivery=lambda error, message, rid=record_id: self._delivered(
                        rid, error, message
                    ),
                )
            except BufferError:  # the local queue is full (cluster slow or down)
                break
            self.sequence += 1
            self._sent += 1
        producer.poll(_POLL_S)

    def disconnect(self, timeout_s: float) -> None:
        producer = self._live()
        remaining = producer.flush(timeout_s)
        if remaining:
            # Not sent in time: cancel them, so none reaches the cluster after the
            # client stopped (their delivery reports say so; the ledger omits them).
            producer.purge()
            producer.flush(0)
            log.error(
                "%s: %d records to %s on %s not acknowledged within %.1fs; cancelled, so "
                "they are not in the ledger (if the broker stored one already, a consumer "
                "sees an unknown id)",
                self.client_id,
                remaining,
                self.topic,
                self._cluster,
                timeout_s,
            )
        self.ledger.flush()
        self._producer = None

    def _live(self) -> Producer:
        assert self._producer is not None, "FencedClient calls connect() first"
        return self._producer

    def _delivered(self, record_id: str, error: KafkaError | None, message: Message) -> None:
        if error is not None and error.code() in REFUSED:  # no retry helps: stop, say why
            raise access_denied(self, self._cluster, error, "WRITE", f"TOPIC {self.topic}")
        if error is not None:
            if error.code() not in _UNSENT:
                log.error("%s: record %s not delivered: %s", self.client_id, record_id, error.str())
            return
        self.ledger.write(
            LedgerEntry(record_id, self._cluster, self.topic, message.partition(), message.offset())
        )


if __name__ == "__main__":
    raise SystemExit(main(DemoProducer, "Demo producer that follows DR fences and failovers."))
