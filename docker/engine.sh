#!/usr/bin/env bash
# Make a Docker engine answer on this machine: `make docker-engine`.
#
# Nothing happens when `docker info` already answers. Otherwise Debian's docker.io
# (dockerd 20.10), debootstrap (for the base image) and docker-compose (the CLI the
# Makefile and the tests use) are installed if missing, and dockerd is started as a
# daemon of its own session. Its data root (images and build cache) is
# $DOCKER_DATA_ROOT, default /var/lib/docker, which outlives a clone of the
# repository, so the second build on a machine reuses every cached layer.
# dockerd needs root: without root and without passwordless sudo this exits 2,
# which the Docker test reports as its reason to skip.
set -euo pipefail

DATA_ROOT=${DOCKER_DATA_ROOT:-/var/lib/docker}
EXEC_ROOT=${DOCKER_EXEC_ROOT:-/run/docker-replicator}
LOG=${DOCKER_LOG:-/var/log/dockerd-replicator.log}
START_TIMEOUT_S=${DOCKER_START_TIMEOUT_S:-90}
PACKAGES=(docker.io debootstrap docker-compose)

if docker info >/dev/null 2>&1 && command -v docker-compose >/dev/null \
	&& command -v debootstrap >/dev/null; then
	exit 0
fi

if [ "$(id -u)" = 0 ]; then
	as_root=()
elif sudo -n true 2>/dev/null; then
	as_root=(sudo -n)
else
	echo "docker-engine: no Docker engine answers and dockerd needs root (no passwordless sudo)" >&2
	exit 2
fi

missing=()
for package in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" \
		|| missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
	apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600)
	"${apt[@]}" install -y --no-install-recommends "${missing[@]}" \
		|| { "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "${missing[@]}"; }
fi

if docker info >/dev/null 2>&1; then
	exit 0
fi
if pgrep -x dockerd >/dev/null; then
	echo "docker-engine: a dockerd runs but does not answer on the default socket; see $LOG" >&2
	exit 1
fi
# A dockerd killed earlier leaves its pid file and containerd's state behind; a new
# one started on top of them waits for a containerd that never answers. Its network
# namespaces stay mounted under the exec root (rm: Device or resource busy), so they
# are unmounted first, deepest first.
if [ -d "$EXEC_ROOT" ]; then
	findmnt -rn -o TARGET | { grep "^$EXEC_ROOT/" || true; } | sort -r | while read -r mounted; do
		"${as_root[@]}" umount -l "$mounted"
	done
fi
"${as_root[@]}" rm -rf "$EXEC_ROOT" /var/run/docker.pid
"${as_root[@]}" mkdir -p "$DATA_ROOT" "$(dirname "$LOG")"
echo "docker-engine: starting dockerd (data root $DATA_ROOT, log $LOG)"
"${as_root[@]}" setsid dockerd --data-root "$DATA_ROOT" --exec-root "$EXEC_ROOT" \
	-H unix:///var/run/docker.sock </dev/null >>"$LOG" 2>&1 &

deadline=$((SECONDS + START_TIMEOUT_S))
until docker info >/dev/null 2>&1; do
	if [ $SECONDS -ge $deadline ]; then
		echo "docker-engine: dockerd did not answer within ${START_TIMEOUT_S}s; last lines of $LOG:" >&2
		tail -n 30 "$LOG" >&2
		exit 1
	fi
	sleep 1
done
docker info --format 'docker-engine: dockerd {{.ServerVersion}}, storage driver {{.Driver}}, data root {{.DockerRootDir}}'
