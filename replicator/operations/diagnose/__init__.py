"""Why a topic is not replicated, or not fully: the checks behind `replicator diagnose`.

An operator asking "why is X not on the DR cluster" needs every cause at once and
the fix for each, not the first error. So the diagnosis runs every check that
applies and reports the ones that passed too, so the operator sees what was ruled
out. Each check asks the engine's own rules (the replication policy, the topics
filter, TopicSync, the status topic, TailReader), so the diagnosis cannot
disagree with what the engine does.

The checks come in groups, one module each, run in the order a cause would block
replication: `names` (the topics filter, internal topics, cycles: no cluster
needed), `topics` (the topic on both clusters: existence, partitions, size limits,
permissions), `partitions` (workers, the status topic, resume offsets, lag). They
share `findings` (the topic under diagnosis, the findings so far, and the finding
for a cluster that refused or did not answer, which ends the diagnosis). This
package may import what `replicator.operations` may.
"""

from __future__ import annotations

from replicator.config.model import FlowConfig
from replicator.operations.diagnose.findings import (
    DEFAULT_LAG_THRESHOLD,
    Diagnosis,
    Finding,
    Findings,
    Subject,
    Unverifiable,
    Verdict,
)
from replicator.operations.diagnose.names import check_name
from replicator.operations.diagnose.partitions import check_partitions
from replicator.operations.diagnose.topics import (
    check_max_message_bytes,
    check_source_topic,
    check_target_topic,
)

__all__ = ["DEFAULT_LAG_THRESHOLD", "Diagnosis", "Finding", "diagnose"]


def diagnose(flow: FlowConfig, topic: str, lag_threshold: int = DEFAULT_LAG_THRESHOLD) -> Diagnosis:
    """Why `topic` (its name on the source cluster) is or is not replicated by `flow`."""
    subject = Subject.of(flow, topic, lag_threshold)
    findings = Findings()
    try:
        verdict = _run(subject, findings)
    except Unverifiable as exc:
        findings.append(exc.finding)
        verdict = "unknown"
    return Diagnosis(flow.name, topic, subject.remote, verdict, list(findings))


def _run(subject: Subject, findings: Findings) -> Verdict:
    """The checks, in the order a cause would block replication; a check that rules
    replication out ends the run, since what would follow cannot be told."""
    check_name(subject, findings)
    source = check_source_topic(subject, findings)
    if source is None or findings.problems():
        return "not replicated"
    remote_partitions = check_target_topic(subject, findings, len(source.partitions))
    if remote_partitions is None:
        return "not replicated"
    check_max_message_bytes(subject, findings)
    covered = check_partitions(subject, findings, len(source.partitions), remote_partitions)
    if covered == 0:
        return "not replicated"
    if covered < len(source.partitions) or findings.problems():
        return "partially replicated"
    return "replicated"
