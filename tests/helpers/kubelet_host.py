"""What the test node's kubelet changes on the host outside its own folders, put back
when the node stops (tests/helpers/kube_node.py):

- kernel settings it sets at start (its `protectKernelDefaults` is off): overcommit,
  panic on oops, key quotas;
- iptables chains it makes in the filter, nat and mangle tables, IPv4 and IPv6
  (`KUBE-FIREWALL`, which drops packets to 127.0.0.0/8 from other sources, with its
  jumps from INPUT and OUTPUT; the `KUBE-KUBELET-CANARY` chains it watches for a flush;
  `KUBE-IPTABLES-HINT`).

Only what was not there before the node started is removed, and only the kubelet's
chains: the rules Docker (or anything else) adds meanwhile are left alone.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
_CHAINS = ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT")
_TABLES = ("filter", "nat", "mangle")
_IPTABLES = tuple(name for name in ("iptables", "ip6tables") if shutil.which(name))


def _rules(binary: str, table: str) -> list[str]:
    result = subprocess.run(
        [binary, "-w", "-t", table, "-S"], capture_output=True, text=True, timeout=30, check=False
    )
    return result.stdout.splitlines() if result.returncode == 0 else []


def _kubelet_chains() -> set[tuple[str, str, str]]:
    """(binary, table, chain) of the kubelet's chains that exist now."""
    return {
        (binary, table, line.split()[1])
        for binary in _IPTABLES
        for table in _TABLES
        for line in _rules(binary, table)
        if line.startswith("-N ") and line.split()[1] in _CHAINS
    }


def _remove_chain(binary: str, table: str, chain: str) -> None:
    """Delete the rules that jump to `chain`, then flush and delete it."""
    for line in _rules(binary, table):
        words = line.split()
        if words[0] == "-A" and words[-2:] == ["-j", chain]:
            subprocess.run(
                [binary, "-w", "-t", table, "-D", *words[1:]],
                capture_output=True, timeout=30, check=False,
            )  # fmt: skip
    for action in ("-F", "-X"):
        subprocess.run(
            [binary, "-w", "-t", table, action, chain], capture_output=True, timeout=30, check=False
        )


@contextmanager
def restored_host() -> Iterator[None]:
    """Put back, at the end, the kernel settings and iptables chains the kubelet changes."""
    settings = {}
    for key in _SYSCTLS:
        path = Path("/proc/sys") / key
        if path.exists():
            settings[path] = path.read_text()
    chains_before = _kubelet_chains()
    try:
        yield
    finally:
        for path, value in settings.items():
            with suppress(OSError):
                if path.read_text() != value:
                    path.write_text(value)
        for binary, table, chain in sorted(_kubelet_chains() - chains_before):
            _remove_chain(binary, table, chain)
