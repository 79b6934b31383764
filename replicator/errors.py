"""Errors the replicator reports to its user.

Every message is complete on its own: it names the key, topic, partition or
offset concerned and says how to fix it. The CLI prints it as one line;
callers never need the traceback to act on it. Messages never hold secrets.
"""


class ReplicatorError(RuntimeError):
    """Base of every error the replicator raises on purpose."""


class ConfigError(ReplicatorError):
    """The configuration cannot be used; the message names the key."""
