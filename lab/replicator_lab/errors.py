"""The one error type of the local stack."""

from replicator.errors import ReplicatorError


class StackError(ReplicatorError):
    """A local-stack operation cannot proceed.

    The message is one line that names the cluster, port or path concerned and
    says how to fix it; the CLI prints it as is.
    """
