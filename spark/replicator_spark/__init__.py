"""The Spark side of verification: `verify` is the job `replicator verify` submits.

A package of its own (not under `replicator`, which never imports Spark), shipped in
the same distribution so the job is found where the project is installed.
"""
