#!/usr/bin/env bash
# Build the Debian bookworm base image every image of this project starts from here:
# `make base-image` (Docker Hub does not answer on these machines, so nothing can be
# pulled). debootstrap --variant=minbase from the Debian archive apt already uses,
# the host's CA bundle and its own CAs copied in (pip, Maven and apt in a build then
# trust what the host trusts), imported with `docker import`. Skipped when the image exists.
set -euo pipefail

IMAGE=${1:?usage: base-image.sh IMAGE:TAG}
SUITE=bookworm

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
	exit 0
fi

mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null \
	| grep -v -- '-security' | head -n 1)
if [ -z "$mirror" ]; then
	mirror=$(awk '$1 == "deb" && $3 == "'$SUITE'" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

root=$(mktemp -d "${TMPDIR:-/tmp}/replicator-base.XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "base-image: debootstrap $SUITE from $mirror"
debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 \
	|| { tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
mkdir -p "$root/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# The host's own CAs as well: when a build installs Debian's ca-certificates (a JDK
# pulls it in), the bundle is regenerated from these and Java's cacerts gets them too.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	mkdir -p "$root/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
# The same archive (and its security suite) for apt inside builds; no caches in layers.
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb ${mirror%/debian}/debian-security $SUITE-security main
SOURCES
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
	--change 'ENV LANG=C.UTF-8' \
	--change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
	--change 'CMD ["bash"]' \
	- "$IMAGE" >/dev/null
echo "base-image: $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | numfmt --to=iec))"
