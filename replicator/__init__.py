"""Kafka disaster recovery: replication engine, offset translation and DR procedures.

The library every other part of the project (DAGs, plugins, Spark jobs, GX
suites) calls. It never imports Airflow, Spark or Great Expectations.

Its packages, lowest layer first; each imports only its own layer and the ones
below (`tests/test_layering.py` checks it, and that no import circle exists):
the foundation modules here (`errors`, `backoff`, `metrics`, `flow_timer`), `config`, `kafka`
(clients and read primitives), `statestore`, `engine` (the data path), `offsets`
(group offsets and checkpoints), then `operations`, `procedures`, `verification`,
`acls` and `reports`, then `cli`. The local stack (clusters, PostgreSQL, Airflow and
the demo on one machine) is no part of it: `lab/replicator_lab`, which imports the
product and is never imported by it.
"""

__version__ = "0.1.0"
