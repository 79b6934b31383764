#!/usr/bin/env bash
# First start on an empty $PGDATA: initdb (superuser password $POSTGRES_PASSWORD,
# scram-sha-256 for every TCP connection), then one role and one database of the same
# name for each NAME=PASSWORD word of $POSTGRES_DATABASES. Every start: exec postgres,
# listening on all interfaces of the container (compose publishes it on 127.0.0.1 only).
set -euo pipefail

: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (docker-compose takes it from .env)}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" --auth-local=peer \
		--auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
	echo "host all all ::/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
	for entry in ${POSTGRES_DATABASES:-}; do
		name=${entry%%=*}
		password=${entry#*=}
		# Passwords come from make's .env (hex) and names from compose: no quoting games.
		psql -v ON_ERROR_STOP=1 -q -U postgres -d postgres \
			-v name="$name" -v password="$password" <<'SQL'
CREATE ROLE :"name" LOGIN PASSWORD :'password';
CREATE DATABASE :"name" OWNER :"name";
SQL
		echo "postgres-entrypoint: created role and database $name"
	done
	pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
