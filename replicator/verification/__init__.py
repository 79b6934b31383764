"""Verification of a flow's copy: what to compare (planned here, without Spark) and
the Spark jobs under `spark/` that compare it."""
