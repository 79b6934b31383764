"""The replication engine: what a running replication task does and what only it needs. The
consume-map-produce loop (`task`) and the parts it composes, each the one owner of its
state (`partitions`, `target_writer` with its `deliveries`, `rebalance`,
`replicated_topics`, `source_consumer` settings), and what it consults, each on its own:
the record `rewrite`, the `partition` it tracks, `resume` points, `exactly_once` commit
handling over the `transactions`, the `size_limits` and `retention` policies,
`offset_syncs`, `heartbeats`, status and metrics `reporting`, what `kafka_errors` mean
to it; the record `headers` and internal-topic `formats` it writes, replication
`policies` (remote topic names), `topic_sync` (remote topics and configs), the resume
point read from the target's `tail`, the compacted `internal_topics` and the worker
`status` kept in them (with `live_workers`, the one reading of it everybody shares), and
offset `resets` (the request record and the task's decision to honour it, from its own
read of the tail; requesting a reset is `replicator.procedures.reset_requests`). It may
import `replicator.kafka`, `replicator.config`, `replicator.statestore` and the
foundation modules (`errors`, `backoff`, `metrics`), never `offsets`, `operations`,
`procedures`, `verification`, `cli`, Airflow, Spark or Great Expectations
(`tests/test_layering.py`). Import the modules themselves; this package re-exports
nothing, so a worker process imports only what the data path needs.
"""
