"""What tests share: clusters and topics (`kafka`), replication runs and waits
(`replication`), procedure scenes (`procedures`, a fixture plugin), Airflow `dag.test()`
runs (`airflow`), the browser (`browser`), Data Docs and reports (`data_docs`,
`reports`), PostgreSQL (`postgres`, a fixture plugin) and the secured stack (`secured`,
a fixture plugin). Tests import them as `helpers.<module>`; `tests/conftest.py` loads
the fixture plugins for every test. Helpers import `replicator` and each other, never a
test module."""
