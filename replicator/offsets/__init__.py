"""Consumer-group offsets across clusters: `groups` reads and commits a cluster's group
offsets, `translation` finds a source position on the target exactly (by bisecting
the target partition on the replicas' source-offset headers, read with the engine's
`tail` and `kafka.range_reads`), `checkpoints` turns translated positions into
MM2-format checkpoints and, when enabled, commits them to the target, and
`checkpoint_loop` does that on the flow's schedule inside `replicator run`. It may
import `replicator.engine` and everything below it (`kafka`, `config`, `statestore`,
the foundation modules); the engine never imports it. Import the modules themselves;
this package re-exports nothing.
"""
