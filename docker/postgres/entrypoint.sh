#!/usr/bin/env bash
# First start on an empty $PGDATA: initdb (superuser password from the file
# $POSTGRES_PASSWORD_FILE, or $POSTGRES_PASSWORD), scram-sha-256 for every TCP
# connection, then one role and one database of the same name for each NAME=FILE word of
# $POSTGRES_DATABASE_PASSWORD_FILES (the password in FILE; Docker secrets) or NAME=PASSWORD
# word of $POSTGRES_DATABASES. Every start: exec postgres, listening on all interfaces of
# the container (compose publishes it on 127.0.0.1 only).
set -euo pipefail

# The content of file $1 (a secret), named in the error if it cannot be read.
read_secret() {
	if [ ! -r "$1" ]; then
		echo "postgres-entrypoint: cannot read $1 as $(id -un) (uid $(id -u)); mount the secret readable by this user" >&2
		exit 1
	fi
	cat "$1"
}

if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
	POSTGRES_PASSWORD=$(read_secret "$POSTGRES_PASSWORD_FILE")
fi
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD_FILE (docker-compose.yml: a secret) or POSTGRES_PASSWORD}"
databases=${POSTGRES_DATABASES:-}
for entry in ${POSTGRES_DATABASE_PASSWORD_FILES:-}; do
	databases+=" ${entry%%=*}=$(read_secret "${entry#*=}")"
done

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" --auth-local=peer \
		--auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
	echo "host all all ::/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
	for entry in $databases; do
		name=${entry%%=*}
		password=${entry#*=}
		# Passwords come from docker/make-env.sh (hex) and names from compose: no quoting games.
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
