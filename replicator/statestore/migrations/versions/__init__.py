"""One Alembic revision per file, oldest first by number; never edit a released one."""
