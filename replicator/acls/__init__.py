"""The ACLs a DR setup needs and keeps: `plan` derives from a configuration the exact
ACLs each principal needs (`replicator acls plan|apply`, `apply` creates them),
`sync`, `loop` and `status` copy the source topics' ACLs to their replicas by MM2's
rules (`sync.topic.acls.*`) and publish the outcome, `grants` is the WRITE a
failover's `grant_write` step gives applications' producers, over the plain values
and admin calls of `bindings`. `principal` (who a cluster's clients are to its
authorizer) sits lower, with `kafka`, so the engine can name the principal in its
errors; the rest is in the top layer beside `operations` and `procedures` and may
import `offsets`, `engine` and everything below them. Import the modules
themselves; this package re-exports nothing.
"""
