"""The checks on the topic's name alone: the rules TopicSync applies to a name (the
topics filter, internal topics, cycles), one finding each. They need no cluster."""

from __future__ import annotations

from replicator.operations.diagnose.findings import Findings, Subject


def check_name(subject: Subject, findings: Findings) -> None:
    topic, flow, policy = subject.topic, subject.flow, subject.policy
    target = flow.target.alias
    if policy.is_heartbeats_topic(topic):
        findings.add("topics filter", "ok", f"{topic}: heartbeats topics always replicate")
    elif reason := flow.topics.why_not(topic):
        findings.add(
            "topics filter",
            "problem",
            f"{topic} {reason} of flow {flow.name} (topics / topics.exclude)",
            f"change {flow.name}.topics or {flow.name}.topics.exclude (or the top-level "
            f"keys) so that {topic} matches topics and no exclude pattern, then restart "
            "the replicator",
        )
    else:
        findings.add("topics filter", "ok", f"{topic} matches topics and no exclude pattern")

    if policy.is_internal_topic(topic):
        findings.add(
            "internal topic",
            "problem",
            f"{topic} is an internal topic (Kafka, Connect or MirrorMaker 2); "
            "these are never replicated, as in MM2",
            "none in the replicator: internal topics stay on their cluster; copy the data "
            "through a regular topic if the DR site needs it",
        )
    else:
        findings.add("internal topic", "ok", f"{topic} is not an internal topic")

    if policy.is_cycle(topic, target):
        findings.add(
            "cycle",
            "problem",
            f"{topic} came from {target!r} (replication policy naming): replicating "
            "it back there would loop",
            f"none needed: the original is {policy.original_topic(topic)} on "
            f"{target!r}; read it there",
        )
    else:
        findings.add("cycle", "ok", f"{topic} did not come from {target!r}: no loop")
