"""A real Kubernetes API server for the Helm chart's tests, as controller-runtime's envtest
runs one: etcd and kube-apiserver from `.cache/k8s/bin/` (`make setup` builds them from
tools/k8s/), on free loopback ports, everything under a temporary folder, stopped at the
end. No controller manager, no scheduler, no kubelet: objects are stored, validated and
authorized by the API server, but no Deployment gets a Pod and no Pod runs.

- authentication: a static token file with one admin (group `system:masters`); other
  identities are reached by impersonation (`Kube.as_user`), which the admin may do;
- authorization: RBAC only, so Roles and RoleBindings are enforced as on a cluster;
- service accounts: a key pair made here with `cryptography`, the issuer
  `https://kubernetes.default.svc`;
- TLS: a self-signed serving certificate for 127.0.0.1 made here, which the clients trust.

`helm()` runs the helm built beside them, with its caches under the same folder.
Under `CI=true` a missing binary fails the test; elsewhere it skips, naming `make setup`.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from helpers.kafka import free_port_pairs

ROOT = Path(__file__).resolve().parents[2]
#: Where `make setup` puts the binaries (tools/k8s/, Makefile).
BIN_DIR = ROOT / ".cache" / "k8s" / "bin"
BINARIES = ("etcd", "kube-apiserver", "helm")
#: The API server's start on a machine as loaded as `make test` makes it (about 20 s idle).
START_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 30.0


def binaries() -> dict[str, Path]:
    """The three binaries; a missing one fails under CI=true, else skips the test."""
    paths = {name: BIN_DIR / name for name in BINARIES}
    missing = [name for name, path in paths.items() if not os.access(path, os.X_OK)]
    if missing:
        reason = (
            f"{', '.join(missing)} not built in {BIN_DIR}: run `make setup` (it builds them "
            "from tools/k8s/ with go)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return paths


def helm(*args: str, home: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`helm ARGS` with its cache, config and data under `home` (nothing of the user's)."""
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    result = subprocess.run(
        [str(binaries()["helm"]), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def render(chart: Path, release: str, namespace: str, home: Path, *values: Path) -> list[dict]:
    """The objects `helm template` renders (empty documents dropped)."""
    args = ["template", release, str(chart), "--namespace", namespace]
    for path in values:
        args += ["--values", str(path)]
    out = helm(*args, home=home).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@dataclass
class Kube:
    """An HTTP client of the API server, as the admin or as an impersonated user."""

    url: str
    token: str = field(repr=False)
    ca_file: Path
    impersonate: str | None = None
    _resources: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)

    def as_user(self, user: str) -> Kube:
        """The same server as `user` (e.g. `system:serviceaccount:NS:NAME`): the admin's
        token with `Impersonate-User`; the API server adds a service account's groups."""
        return Kube(self.url, self.token, self.ca_file, user, self._resources)

    @contextmanager
    def _client(self) -> Iterator[httpx.Client]:
        headers = {"Authorization": f"Bearer {self.token}"}
        if self.impersonate:
            headers["Impersonate-User"] = self.impersonate
        with httpx.Client(
            base_url=self.url,
            headers=headers,
            verify=ssl.create_default_context(cafile=str(self.ca_file)),
            timeout=REQUEST_TIMEOUT_S,
        ) as client:
            yield client

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with self._client() as client:
            return client.request(method, path, **kwargs)

    def path(self, api_version: str, kind: str, namespace: str | None, name: str = "") -> str:
        """The URL path of `kind`'s collection (or of object `name`), found through the
        server's discovery (so any kind it serves works, and an unknown one fails)."""
        key = (api_version, kind)
        if key not in self._resources:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            response = self.request("GET", base)
            response.raise_for_status()
            for resource in response.json()["resources"]:
                if "/" not in resource["name"]:
                    self._resources[(api_version, resource["kind"])] = (
                        resource["name"],
                        resource["namespaced"],
                    )
        if key not in self._resources:
            raise AssertionError(f"the API server serves no {kind} in {api_version}")
        plural, namespaced = self._resources[key]
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        scope = f"/namespaces/{namespace}" if namespaced and namespace else ""
        return f"{base}{scope}/{plural}" + (f"/{name}" if name else "")

    def create(self, obj: dict, namespace: str | None = None) -> httpx.Response:
        """POST `obj` with strict server-side field validation (an unknown or duplicated
        field is an error, not dropped); returns the response, whatever its status."""
        ns = obj.get("metadata", {}).get("namespace") or namespace
        path = self.path(obj["apiVersion"], obj["kind"], ns)
        return self.request("POST", path, params={"fieldValidation": "Strict"}, json=obj)

    def create_namespace(self, name: str) -> None:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        response = self.create(ns)
        assert response.status_code == 201, response.text


@dataclass
class ApiServer:
    kube: Kube
    helm_home: Path
    #: The key that signs service account tokens (the controller manager's token
    #: controller signs with it too: tests/helpers/kube_node.py).
    service_account_key: Path


def _serving_cert(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "serving.crt", folder / "serving.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def _service_account_keys(folder: Path) -> tuple[Path, Path]:
    """The key pair that signs (private) and checks (public) service account tokens."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = folder / "sa.key", folder / "sa.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


@contextmanager
def managed_process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def log_tail(log: Path, lines: int = 30) -> str:
    text = log.read_text(errors="replace") if log.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _wait_ready(kube: Kube, processes: dict[str, tuple[subprocess.Popen, Path]]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last = "no answer yet"
    while time.monotonic() < deadline:
        for name, (process, log) in processes.items():
            if process.poll() is not None:
                raise AssertionError(
                    f"{name} exited {process.returncode} while starting; its log ({log}):\n"
                    + log_tail(log)
                )
        try:
            response = kube.request("GET", "/readyz", timeout=5)
            if response.status_code == 200:
                return
            last = f"/readyz {response.status_code}: {response.text[-500:]}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.5)
    log = processes["kube-apiserver"][1]
    raise AssertionError(
        f"kube-apiserver not ready in {START_TIMEOUT_S:.0f} s ({last}); its log ({log}):\n"
        + log_tail(log)
    )


@contextmanager
def api_server(folder: Path) -> Iterator[ApiServer]:
    """etcd and kube-apiserver under `folder` (data, certificates, logs), ready."""
    paths = binaries()
    etcd_port, apiserver_port = free_port_pairs(2)  # etcd: client P, peer P+1
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{etcd_port + 1}"
    cert_file, key_file = _serving_cert(folder)
    sa_key, sa_pub = _service_account_keys(folder)
    token = secrets.token_hex(24)
    tokens = folder / "tokens.csv"
    tokens.write_text(f'{token},admin,admin,"system:masters"\n')
    tokens.chmod(0o600)
    kube = Kube(f"https://127.0.0.1:{apiserver_port}", token, cert_file)
    with ExitStack() as stack:
        etcd_log, apiserver_log = folder / "etcd.log", folder / "kube-apiserver.log"
        etcd = stack.enter_context(
            managed_process(
                [
                    str(paths["etcd"]),
                    "--name=test",
                    f"--data-dir={folder / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=test={peer_url}",
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
                etcd_log,
            )
        )
        apiserver = stack.enter_context(
            managed_process(
                [
                    str(paths["kube-apiserver"]),
                    f"--etcd-servers={etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={apiserver_port}",
                    f"--cert-dir={folder / 'certs'}",
                    f"--tls-cert-file={cert_file}",
                    f"--tls-private-key-file={key_file}",
                    f"--token-auth-file={tokens}",
                    "--authorization-mode=RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    f"--service-account-key-file={sa_pub}",
                    f"--service-account-signing-key-file={sa_key}",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--allow-privileged=true",
                    "--profiling=false",
                ],
                apiserver_log,
            )
        )
        _wait_ready(kube, {"etcd": (etcd, etcd_log), "kube-apiserver": (apiserver, apiserver_log)})
        yield ApiServer(kube, folder / "helm", sa_key)
