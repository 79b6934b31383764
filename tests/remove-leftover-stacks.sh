#!/usr/bin/env bash
# Remove the compose stacks earlier test sessions left behind (`make test` runs this
# before its solo phase). A session killed before its teardown leaves its containers,
# and their restart policies bring them back with the Docker engine, where they take
# the CPU of the tests after them. Every test stack's project name starts with
# replicator-test- (tests/helpers/compose.py); none of them runs when this does.
set -euo pipefail

prefix=replicator-test-
containers=$(docker container ls -aq --filter "name=$prefix")
if [ -n "$containers" ]; then
	echo "removing containers of earlier test stacks: $(docker container ls -a --filter "name=$prefix" --format '{{.Names}}' | tr '\n' ' ')"
	docker container rm -f $containers >/dev/null
fi
for kind in network volume; do
	found=$(docker "$kind" ls -q --filter "name=$prefix")
	if [ -n "$found" ]; then
		docker "$kind" rm $found >/dev/null
	fi
done
