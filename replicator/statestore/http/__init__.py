"""The state store's read-only HTTP view (`create_app`), for the Airflow plugin and scripts.

A subpackage of its own so that importing `replicator.statestore` (the engine, the
procedures, every client application) does not import FastAPI: only a host that
serves the view imports this. It may import FastAPI and the rest of
`replicator.statestore` and `config`, and nothing above the store.
"""

from replicator.statestore.http.app import create_app

__all__ = ["create_app"]
