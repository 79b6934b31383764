"""The replicating process's memory allocator: jemalloc when the machine has it.

librdkafka allocates and frees several small blocks per record, on different threads
(the application thread builds a message, a broker thread frees it after the ack).
glibc's malloc spends about a third of the compiled data path's CPU on that (perf,
docs/dataplane.md, "Performance"); jemalloc's per-thread caches cut the CPU per record
of the compiled path by about 40%. An allocator is chosen when a process starts
(`LD_PRELOAD`), so `replicator run` started from its own command line re-executes
itself once with jemalloc preloaded; the launchers and images start workers that way.

jemalloc is started with `TUNING` in `MALLOC_CONF` (unless the user set `MALLOC_CONF`,
which is then used as given): see there.

`$REPLICATOR_ALLOCATOR` chooses (declared once, in `CHOICES`):
- `auto` (default): jemalloc when the dynamic linker finds `libjemalloc` (Debian and
  Ubuntu: `libjemalloc2`; RHEL: `jemalloc`), else the system's allocator, said in the log;
- `jemalloc`: jemalloc or a clear error at start;
- `system`: the C library's malloc, never re-executed.
"""

from __future__ import annotations

import ctypes.util
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from replicator.errors import ReplicatorError

log = logging.getLogger(__name__)

ENV = "REPLICATOR_ALLOCATOR"
CHOICES = {
    "auto": "jemalloc when the machine has it, else the system's allocator",
    "jemalloc": "jemalloc, or an error at start when it is missing",
    "system": "the C library's malloc",
}
#: jemalloc's settings for the replicating process. `oversize_threshold:0`: jemalloc
#: serves allocations of 8 MiB and more from a dedicated arena that gives its pages
#: back to the kernel as soon as they are freed (decay 0), and librdkafka's fetch
#: responses are that large (up to `max.partition.fetch.bytes`, 1 MB, per partition, a
#: dozen partitions a broker), so every fetch faulted in fresh zeroed pages: about a
#: sixth of a bare Mover's CPU at 1 KB records (docs/dataplane.md, "Performance").
#: With the threshold at 0 (no dedicated arena) they come from the ordinary arenas,
#: whose freed pages go back to the kernel over jemalloc's usual 10 s decay.
TUNING = "oversize_threshold:0"
_LIBRARY = "jemalloc"
_INSTALL = (
    "install libjemalloc2 (Debian, Ubuntu) or jemalloc (RHEL), or set "
    f"{ENV}=system to run on the C library's malloc"
)


def choice(environ: Mapping[str, str] = os.environ) -> str:
    """`$REPLICATOR_ALLOCATOR`, checked."""
    value = environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ReplicatorError(
            f"{ENV}={environ[ENV]!r} is not an allocator; use one of "
            + ", ".join(f"{name} ({doc})" for name, doc in CHOICES.items())
        )
    return value


def preloaded(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `LD_PRELOAD` already names jemalloc (set by us or by the user)."""
    return any(_LIBRARY in Path(entry).name for entry in _preloads(environ))


def environment(environ: Mapping[str, str] = os.environ) -> dict[str, str] | None:
    """`environ` with jemalloc added to `LD_PRELOAD` as `$REPLICATOR_ALLOCATOR` asks
    (and `MALLOC_CONF` set to `TUNING` unless `environ` has one), or None when nothing
    is to change (the system's allocator, or jemalloc already preloaded). Raises when
    jemalloc is required and missing."""
    wanted = choice(environ)
    if wanted == "system" or preloaded(environ):
        return None
    library = ctypes.util.find_library(_LIBRARY)  # the soname, e.g. libjemalloc.so.2
    if library is None:
        if wanted == "jemalloc":
            raise ReplicatorError(
                f"{ENV}=jemalloc, but this machine has no libjemalloc: {_INSTALL}"
            )
        return None
    return {
        **environ,
        "LD_PRELOAD": " ".join([*_preloads(environ), library]),
        "MALLOC_CONF": environ.get("MALLOC_CONF") or TUNING,
    }


def reexecute_with_preferred() -> None:
    """Re-execute this process (same interpreter, same arguments, same pid) with
    jemalloc preloaded when `$REPLICATOR_ALLOCATOR` asks for it and it is not yet;
    returns when nothing is to change. Call it before any thread starts."""
    env = environment()
    if env is None:
        return
    log.debug(
        "memory allocator: re-executing with LD_PRELOAD=%s MALLOC_CONF=%s",
        env["LD_PRELOAD"],
        env["MALLOC_CONF"],
    )
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execve(sys.executable, sys.orig_argv, env)  # noqa: S606 - this process, again


def in_use() -> str:
    """The allocator this process runs on, for the log: jemalloc's file when it is
    mapped, else the C library's."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:  # not Linux: whatever the platform's malloc is
        return "the system's malloc"
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address perms offset dev inode [path]
        path = fields[5] if len(fields) == 6 else ""
        if _LIBRARY in Path(path).name:
            return f"jemalloc ({path})"
    return "the C library's malloc"


def report() -> None:
    """One log line: the allocator this process runs on, and what to do when it is not
    the one `$REPLICATOR_ALLOCATOR` prefers."""
    used = in_use()
    if used.startswith("jemalloc"):
        log.info("memory allocator: %s, MALLOC_CONF=%s", used, os.environ.get("MALLOC_CONF", ""))
    elif choice() == "system":
        log.info("memory allocator: %s", used)
    elif preloaded():
        log.warning(
            "memory allocator: %s, although LD_PRELOAD names jemalloc (%s): the dynamic "
            "linker could not load it; check the path, or %s",
            used,
            os.environ.get("LD_PRELOAD", ""),
            _INSTALL,
        )
    else:
        log.info(
            "memory allocator: %s; with jemalloc the compiled data path uses about 40%% "
            "less CPU per record: %s",
            used,
            _INSTALL,
        )


def _preloads(environ: Mapping[str, str]) -> list[str]:
    return environ.get("LD_PRELOAD", "").replace(":", " ").split()
