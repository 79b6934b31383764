"""The state store's schema migrations (Alembic): `env.py`, and one file per revision
under `versions/`. `replicator.statestore.migrate` runs them; see its docstring.
`env.py` imports the store's `schema` and `database`; a revision imports only Alembic
and SQLAlchemy (it must keep working when the store's code changes)."""
