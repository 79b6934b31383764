"""One round of the periodic sync work of each flow, for a scheduler to run.

`replicator run` does this work in its own loops (checkpoints and group-offset
sync in `replicator.offsets.checkpoint_loop`, topics and configs in the task). The
`replication_sync` DAG runs the same rounds from Airflow, so they go on,
visibly and with a history, also while workers restart, and an operator can
run one on demand (before a drill, after changing a topic's configs):

- `topics`: create missing remote topics, grow partition counts, copy topic
  configs (`sync.topic.configs.enabled`; `TopicSync.sync`);
- `checkpoints`: translate the flow's consumer groups, write the checkpoints
  that moved forward, and with `sync.group.offsets.enabled` commit them to
  idle target groups (`Checkpointer.emit`);
- `acls`: with `sync.topic.acls.enabled`, copy the source topics' ACLs to
  their remote topics by MM2's rules, and publish the outcome for the status
  page (`replicator.acls.status.sync_and_publish`).

Flows the DR state store has stopped are left alone: a failover owns them, and
writes their final checkpoint itself. Every round is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast

from confluent_kafka import KafkaException

from replicator.acls.status import sync_and_publish
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.offsets.checkpoints import Checkpointer
from replicator.operations.runner import select_flows
from replicator.statestore import FlowState, StateStoreError
from replicator.statestore.flow_states import FlowStateStore, runs

log = logging.getLogger(__name__)

Concern = Literal["topics", "checkpoints", "acls"]
CONCERNS: tuple[Concern, ...] = ("topics", "checkpoints", "acls")


@dataclass
class FlowSync:
    """What one round did for one flow; `skipped` says why it did nothing."""

    flow: str
    skipped: str | None = None
    topics_created: list[str] = field(default_factory=list)
    partitions_grown: dict[str, int] = field(default_factory=dict)
    configs_changed: dict[str, list[str]] = field(default_factory=dict)
    checkpoints_emitted: int = 0
    checkpoints_unchanged: int = 0
    #: Positions not checkpointed: records before them are not replicated yet.
    checkpoints_held: int = 0
    #: Target group -> partitions whose offsets were committed there.
    groups_synced: dict[str, int] = field(default_factory=dict)
    #: Groups with active members on the target, left alone.
    active_groups: list[str] = field(default_factory=list)
    #: ACL sync (None: not enabled for the flow, or not asked for): target ACLs the
    #: source's synced ACLs make, those created now, and source ACLs left out by rule.
    acls_synced: int | None = None
    acls_created: list[str] = field(default_factory=list)
    acls_left_out: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def sync_round(
    config: ReplicatorConfig,
    store: FlowStateStore,
    concerns: tuple[Concern, ...] = CONCERNS,
    flows: list[str] | None = None,
) -> list[FlowSync]:
    """One round of `concerns` for every flow (or those named) the store wants
    running. A flow that fails does not stop the others; ReplicatorError naming
    each failed flow and why, after all were tried."""
    unknown = sorted(set(concerns) - set(CONCERNS))
    if unknown:
        raise ReplicatorError(f"unknown sync concerns {unknown}; choose from {list(CONCERNS)}")
    results, failures = [], []
    for flow in select_flows(config, flows):
        try:
            state = store.get(flow.name)
        except StateStoreError as exc:  # any database error: nothing ran, the task retries
            raise ReplicatorError(
                f"sync round not run: the DR state store cannot say whether flow {flow.name} "
                f"is stopped (a procedure owns a stopped flow): {exc}"
            ) from None
        if not runs(state):
            halted = cast(FlowState, state)  # runs() is True for no row
            results.append(FlowSync(flow.name, skipped=f"{halted.state} in the DR state store"))
            continue
        try:
            results.append(sync_flow(flow, concerns))
        except (ReplicatorError, KafkaException) as exc:
            failures.append(f"flow {flow.name}: {exc}")
    if failures:
        raise ReplicatorError(
            f"sync round failed for {len(failures)} flow(s): {'; '.join(failures)}; the previous "
            "checkpoints and configs stay valid; the next round tries again"
        )
    return results


def sync_flow(flow: FlowConfig, concerns: tuple[Concern, ...] = CONCERNS) -> FlowSync:
    """One round of `concerns` for `flow`, whatever the state store says."""
    result = FlowSync(flow.name)
    if "topics" in concerns:
        sync = TopicSync(flow)
        topics = sync.sync(sync.replicated_topics())
        result.topics_created = topics.created
        result.partitions_grown = topics.grown
        result.configs_changed = topics.configs_changed
    if "checkpoints" in concerns and flow.emit_checkpoints_enabled:
        with Checkpointer(flow) as checkpointer:
            report = checkpointer.emit()
        result.checkpoints_emitted = len(report.emitted)
        result.checkpoints_unchanged = report.unchanged
        result.checkpoints_held = len(report.held)
        result.groups_synced = report.synced_groups
        result.active_groups = report.active_groups
    if "acls" in concerns and flow.sync_topic_acls_enabled:
        acls = sync_and_publish(flow)
        result.acls_synced = acls.synced
        result.acls_created = acls.created
        result.acls_left_out = acls.left_out
    log.info("flow %s: sync round: %s", flow.name, result)
    return result
