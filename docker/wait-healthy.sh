#!/usr/bin/env bash
# Wait until every container of compose project $1 is healthy (or, without a
# healthcheck, running), one-shot jobs having exited 0: `make compose-up` and the
# Docker test. A one-shot that failed or a container that stays unhealthy past the
# timeout ($2 seconds, default 600) ends the wait with its name and the end of its log.
set -euo pipefail

project=${1:?usage: wait-healthy.sh PROJECT [TIMEOUT_S]}
timeout_s=${2:-600}
started=$SECONDS

while :; do
	waiting=()
	while read -r name state health exit_code restart; do
		[ -n "$name" ] || continue
		if [ "$state" = exited ] && [ "$exit_code" = 0 ] && [ "$restart" = no ]; then
			continue  # a one-shot job that did its work
		fi
		if [ "$state" = exited ] && [ "$restart" = no ]; then
			echo "wait-healthy: $name exited with $exit_code; last lines of its log:" >&2
			docker logs --tail 40 "$name" >&2 || true
			exit 1
		fi
		if [ "$state" != running ] || { [ "$health" != healthy ] && [ "$health" != none ]; }; then
			waiting+=("$name($state/$health)")
		fi
	done < <(docker ps -a --filter "label=com.docker.compose.project=$project" -q \
		| xargs -r docker inspect --format \
			'{{.Name}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.State.ExitCode}} {{.HostConfig.RestartPolicy.Name}}')
	if [ ${#waiting[@]} -eq 0 ]; then
		echo "wait-healthy: every container of $project is healthy after $((SECONDS - started))s"
		exit 0
	fi
	if [ $((SECONDS - started)) -ge "$timeout_s" ]; then
		echo "wait-healthy: still not healthy after ${timeout_s}s: ${waiting[*]}" >&2
		for entry in "${waiting[@]}"; do
			name=${entry%%(*}
			echo "--- ${name#/}" >&2
			docker inspect --format '{{range .State.Health.Log}}{{.Output}}{{end}}' "${name#/}" 2>/dev/null | tail -n 5 >&2 || true
			docker logs --tail 20 "${name#/}" >&2 || true
		done
		exit 1
	fi
	sleep 2
done
