"""The replicator's configuration: MM2's `mm2.properties` format, loaded into typed objects.

Everything else in the engine imports from here: `load_config` to read a file,
the dataclasses it returns, and `redact` to show a configuration without its
secrets. It imports only `replicator.errors`, so every package may import it.
"""

from replicator.config.loader import load_config
from replicator.config.model import ClusterConfig, FlowConfig, NameFilter, ReplicatorConfig
from replicator.config.redact import redact
from replicator.errors import ConfigError

__all__ = [
    "ClusterConfig",
    "ConfigError",
    "FlowConfig",
    "NameFilter",
    "ReplicatorConfig",
    "load_config",
    "redact",
]
