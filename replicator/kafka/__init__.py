"""How the replicator talks to Kafka, for every layer: the confluent-kafka clients it
builds (`clients`: librdkafka's logs routed through Python logging, connection
failures reported to the cluster's `reachability` tracker) and the two read
primitives the engine, the offsets, the operations tooling and the procedures all
use (`watermarks` of a partition, bounded `range_reads`). These modules know
clusters, not flows or replicas; they may import only `replicator.config`,
`replicator.errors` and `replicator.metrics`, and every other package may import
them. Import the modules themselves (`from replicator.kafka.clients import
Consumer`): this package re-exports nothing, so importing one costs no other.
"""
