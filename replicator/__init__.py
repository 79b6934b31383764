"""Kafka disaster recovery: replication engine, offset translation and DR procedures.

The library every other part of the project (DAGs, plugins, Spark jobs, GX
suites) calls. It never imports Airflow, Spark or Great Expectations.
"""

__version__ = "0.1.0"
