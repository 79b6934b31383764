"""The test node's pod network: a Linux bridge of its own with a free /24, and the CNI
configuration (bridge + host-local IPAM, Debian's plugins in /usr/lib/cni) that puts
every pod on it (tests/helpers/kube_node.py).

The bridge is made here, with its address, before anything starts, rather than by the
bridge plugin at the first pod: the host's address on it (`PodNetwork.host_address`) is
where pods reach the host, so Kafka brokers for the pods can listen there before any pod
exists (as the compose tests' brokers listen on Docker's bridge). No masquerading and no
iptables rule: pods talk to the host, not beyond it. The bridge is deleted at the end.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: Where Debian's containernetworking-plugins puts the plugins (Makefile, .node-runtime).
CNI_BIN_DIR = Path("/usr/lib/cni")
#: The /24s of the pod network are taken from this range, one not routed here yet.
_POOL = ipaddress.ip_network("10.250.0.0/16")


@dataclass(frozen=True)
class PodNetwork:
    bridge: str
    subnet: ipaddress.IPv4Network
    #: The folder holding the CNI configuration (containerd's `conf_dir`).
    conf_dir: Path

    @property
    def host_address(self) -> str:
        """The host's address on the bridge (the pods' gateway), where pods reach it."""
        return str(next(self.subnet.hosts()))


def _ip(*args: str) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result.stdout


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of the pool that overlaps no route and no address of this host."""
    taken = [
        ipaddress.ip_network(route["dst"], strict=False)
        for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all"))
        if route.get("dst") not in (None, "default")
    ]
    for link in json.loads(_ip("-j", "-4", "addr", "show")):
        for addr in link.get("addr_info", []):
            taken.append(ipaddress.ip_network(f"{addr['local']}/{addr['prefixlen']}", strict=False))
    for subnet in _POOL.subnets(new_prefix=24):
        if not any(subnet.overlaps(other) for other in taken):
            return subnet
    raise AssertionError(f"no free /24 left in {_POOL} for the pod network")


def _conflist(bridge: str, subnet: ipaddress.IPv4Network, ipam_dir: Path) -> dict:
    return {
        "cniVersion": "1.0.0",
        "name": "replicator-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(subnet), "gateway": str(next(subnet.hosts()))}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "loopback"},
        ],
    }


@contextmanager
def pod_network(folder: Path) -> Iterator[PodNetwork]:
    """The bridge (up, with the host's address) and the CNI configuration in
    `folder/net.d`; the bridge is deleted afterwards."""
    plugins = ("bridge", "host-local", "loopback")
    missing = [name for name in plugins if not (CNI_BIN_DIR / name).exists()]
    if missing:
        raise AssertionError(
            f"CNI plugins {missing} missing from {CNI_BIN_DIR}: run `make setup` "
            "(it installs Debian's containernetworking-plugins)"
        )
    subnet = _free_subnet()
    bridge = f"rnode{secrets.token_hex(3)}"
    conf_dir = folder / "net.d"
    conf_dir.mkdir(parents=True)
    conflist = _conflist(bridge, subnet, folder / "ipam")
    (conf_dir / "10-replicator-node.conflist").write_text(json.dumps(conflist, indent=2))
    _ip("link", "add", "name", bridge, "type", "bridge")
    try:
        _ip("addr", "add", f"{next(subnet.hosts())}/{subnet.prefixlen}", "dev", bridge)
        _ip("link", "set", bridge, "up")
        yield PodNetwork(bridge, subnet, conf_dir)
    finally:
        _ip("link", "delete", bridge, "type", "bridge")
