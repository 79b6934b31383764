"""What every Kafka DR DAG shares: one run at a time (two failovers or two
supervisor passes must never interleave), no catch-up (a missed supervisor minute
or drill quarter is not worth replaying), and one tag to filter the UI by."""

from __future__ import annotations

DAG_DEFAULTS: dict[str, object] = {"catchup": False, "max_active_runs": 1, "tags": ["kafka-dr"]}
