"""The state store's schema migrations (Alembic): `env.py`, and one file per revision
under `versions/`. `replicator.statestore.migrate` runs them; see its docstring."""
