"""Airflow integration of the replicator: a hook for its configuration, operators
and sensors over `replicator` functions, and the DR status page (UI plugin)."""
