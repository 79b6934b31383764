#!/usr/bin/env bash
# Run one phase of `make test` (a pytest run, or the image build) under a deadline:
#   tests/phase.sh NAME MINUTES COMMAND...
# A phase still running after MINUTES is stopped, its whole process group with it, and
# fails, saying so and printing where each of its Python processes was (py-spy, a
# minute before the stop): a hang then costs that phase, not CI's 90 minutes and every
# phase after it. A test whose worker the watchdog ended (tests/helpers/watchdog.py: a
# hang pytest-timeout could not reach) left every thread's stack in
# .data/test-artifacts/hangs/; those are printed after the phase too.
set -uo pipefail

name=$1 minutes=$2
shift 2
hangs=.data/test-artifacts/hangs
rm -rf "$hangs"
mkdir -p "$hangs"

# `timeout` runs the phase in a process group of its own (its pid is the group's id)
# and signals the whole group at the deadline.
timeout --kill-after=60s "${minutes}m" "$@" &
phase=$!
# A background job of a script ignores Ctrl-C: pass it on as a stop.
trap 'kill -TERM "$phase" 2>/dev/null' INT TERM
(
	sleep $((minutes * 60 - 60))
	for pid in $(pgrep -g "$phase"); do
		if [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == *python* ]]; then
			echo "== $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-200)"
			"${PY_SPY:-.venv/bin/py-spy}" dump --pid "$pid" 2>&1 || true
		fi
	done >"$hangs/phase-deadline.log"
) &
watcher=$!
wait "$phase"
rc=$?
sleeper=$(pgrep -P "$watcher")
kill "$watcher" $sleeper 2>/dev/null
wait "$watcher" 2>/dev/null

if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	echo "make test: the $name phase was still running after $minutes minutes and was stopped (exit $rc); where its Python processes were a minute before:" >&2
	cat "$hangs/phase-deadline.log" >&2
fi
for stacks in "$hangs"/*.txt; do
	if [ -s "$stacks" ]; then
		echo "make test: a test of the $name phase hung; every thread's stack ($stacks):" >&2
		cat "$stacks" >&2
	fi
done
exit "$rc"
