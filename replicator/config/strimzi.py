"""Strimzi's `KafkaMirrorMaker2` custom resource turned into an `mm2.properties`.

Pure conversion (`replicator import strimzi` reads and writes the files): YAML text or
an already parsed resource in, the properties text and the notes out. Both API shapes
are read: `kafka.strimzi.io/v1beta2` (`spec.clusters` + `spec.connectCluster`, mirrors
naming `sourceCluster`/`targetCluster`) and `v1` (`spec.target`, `spec.mirrors[].source`).

Every field of the spec is mapped, noted, or refused; none is dropped in silence:

* mapped: clusters (aliases, bootstrap servers, TLS trust, SCRAM/PLAIN/mTLS
  authentication, the `config` map as `<alias>.<key>`), mirrors (`<src>-><tgt>.enabled`,
  topic and group patterns, `tasksMax`, the connectors' `config` maps as
  `<src>-><tgt>.<key>`);
* noted (a comment at the top of the output, which the CLI also prints on stderr):
  what belongs to the pods Strimzi runs (replicas, resources, JVM, logging, metrics,
  templates, ...) and Kafka Connect's own worker settings (written as comments);
* refused (ConfigError naming the field and what to do): OAuth and custom
  authentication, trust patterns other than Strimzi's `*.crt`, several trusted
  certificates for one cluster, config providers the replicator has no counterpart of,
  and any field this module does not know.

Secrets are never written literally: Strimzi mounts a Secret as files, and so does the
replicator's deployment (a Kubernetes Secret volume, Docker secrets), so each password
becomes `${directory:<secrets dir>/<secret name>:<key>}` (Kafka's
DirectoryConfigProvider, which `replicator.config.properties` resolves) and each
certificate and key a path `<secrets dir>/<secret name>/<key>`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from replicator.config.keys import TARGET_CLUSTER_SETTINGS, accepted_setting
from replicator.config.redact import is_sensitive
from replicator.errors import ConfigError

KIND = "KafkaMirrorMaker2"
GROUP = "kafka.strimzi.io"
#: Where the Secrets the resource names are mounted, one directory per Secret.
DEFAULT_SECRETS_DIR = "/etc/replicator/secrets"
#: The certificate of a Strimzi cluster CA Secret (`<cluster>-cluster-ca-cert`).
CLUSTER_CA_CERTIFICATE = "ca.crt"

_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SASL = {
    "scram-sha-256": ("SCRAM-SHA-256", _SCRAM_MODULE),
    "scram-sha-512": ("SCRAM-SHA-512", _SCRAM_MODULE),
    "plain": ("PLAIN", _PLAIN_MODULE),
}
_BY_HAND = (
    "write that cluster's security settings by hand (see docs/security.md) and leave "
    "authentication out of the resource you convert"
)

# Kafka's ConfigTransformer syntax: ${provider:[path:]key}.
_REFERENCE = re.compile(r"\$\{([^}:]*):([^}]*)\}")
#: Provider classes the replicator resolves itself, and the name it knows them by.
_PROVIDER_CLASSES = {
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
    # `${secrets:<namespace>/<secret>:<key>}`: the Secret, mounted as files.
    "io.strimzi.kafka.KubernetesSecretConfigProvider": "secret",
}
#: The providers Strimzi's operator declares in every Connect cluster it runs.
_STRIMZI_PROVIDERS = {
    "strimzienv": "env",
    "strimzifile": "file",
    "strimzidir": "directory",
    "strimzisecrets": "secret",
}
_OURS = ("env", "file", "directory")

# --- what the pods are, not what they copy: noted, never mapped ------------------------
_WORKERS = (
    "the replicator runs as many workers as you start on the same file, which share each "
    "flow's partitions through the source cluster's consumer group"
)
_POD = (
    "a setting of the Kafka Connect pods Strimzi runs; the replicator's image and pods are its own"
)
_SPEC_NOTES: dict[str, str] = {
    "replicas": f"{_WORKERS}: start that many (e.g. `docker compose --scale replicator=N` "
    "or the Helm chart's `replicas`)",
    "version": "the Kafka Connect version Strimzi runs; the replicator is not Kafka Connect "
    "and talks to any Kafka broker its clients support",
    "image": _POD,
    "clientRackInitImage": _POD,
    "resources": f"{_POD}: set the replicator container's resources (Helm chart values, "
    "compose limits)",
    "livenessProbe": f"{_POD}: the replicator has probes of its own (Helm chart)",
    "readinessProbe": f"{_POD}: the replicator has probes of its own (Helm chart)",
    "jvmOptions": "the replicator is no JVM process",
    "jmxOptions": "the replicator is no JVM process; its metrics are Prometheus metrics "
    "(docs/monitoring.md)",
    "logging": "Kafka Connect's log4j configuration; the replicator logs with `--verbose` "
    "and `--log-format json`",
    "metricsConfig": "the replicator exports Prometheus metrics itself (metrics.port, "
    "docs/monitoring.md)",
    "metrics": "the replicator exports Prometheus metrics itself (metrics.port, "
    "docs/monitoring.md)",
    "template": f"{_POD}: give the replicator's Deployment the labels, affinity, "
    "tolerations or security context you need (Helm chart values)",
    "affinity": f"{_POD}: set it on the replicator's Deployment (Helm chart values)",
    "tolerations": f"{_POD}: set it on the replicator's Deployment (Helm chart values)",
    "rack": "Strimzi sets the Connect consumers' client.rack from the node's zone; set "
    "<alias>.consumer.client.rack per deployment by hand for follower fetching",
    "tracing": "OpenTelemetry interceptors are Java classes; the replicator has none",
    "externalConfiguration": "environment variables and volumes of the Connect pods: mount "
    "the same Secrets and ConfigMaps into the replicator's pods, where the converted "
    "references expect them",
}
#: Connect worker settings of the v1 target cluster, written as comments (the offsets
#: topic as a key: a takeover reads it).
_TARGET_WORKER_FIELDS = {
    "groupId": "group.id",
    "configStorageTopic": "config.storage.topic",
    "offsetStorageTopic": "offset.storage.topic",
    "statusStorageTopic": "status.storage.topic",
}
_CONNECTORS = ("sourceConnector", "checkpointConnector", "heartbeatConnector")


@dataclass(frozen=True)
class Conversion:
    """One converted resource: the `mm2.properties` text, and what was not mapped."""

    #: `namespace/name` of the resource (`name` without a namespace).
    name: str
    properties: str
    #: One line each, naming the field: what was not mapped and what to do instead.
    notes: tuple[str, ...]
    #: Secret name -> the keys (files) the configuration reads from it.
    secrets: dict[str, tuple[str, ...]] = field(default_factory=dict)


def convert_text(
    text: str,
    *,
    name: str | None = None,
    secrets_dir: str = DEFAULT_SECRETS_DIR,
    source: str = "<resource>",
) -> Conversion:
    """Convert the KafkaMirrorMaker2 resource in the YAML `text` (one document of a
    multi-document file or `kind: List`; `name` picks one of several)."""
    return convert(select_resource(text, name=name, source=source), secrets_dir=secrets_dir)


def select_resource(text: str, *, name: str | None = None, source: str = "<resource>") -> dict:
    """The KafkaMirrorMaker2 document of `text` (the one named `name`, if given)."""
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(f"{source}: not valid YAML{line}: {exc}") from exc
    resources: list[Mapping] = []
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") == "List":
            resources.extend(item for item in document.get("items") or [] if item)
        else:
            resources.append(document)
    for resource in resources:
        if not isinstance(resource, Mapping):
            raise ConfigError(
                f"{source}: a document is a {type(resource).__name__}, not a Kubernetes resource"
            )
    found = [resource for resource in resources if resource.get("kind") == KIND]
    if not found:
        kinds = ", ".join(sorted({str(r.get("kind")) for r in resources})) or "nothing"
        raise ConfigError(
            f"{source}: no {KIND} resource (found: {kinds}); `replicator import strimzi` "
            f"converts Strimzi's {KIND} only"
        )
    names = [_resource_name(resource) for resource in found]
    if name is not None:
        chosen = [r for r, n in zip(found, names, strict=True) if name in (n, n.split("/")[-1])]
        if len(chosen) != 1:
            raise ConfigError(
                f"{source}: {'no' if not chosen else 'more than one'} {KIND} named {name!r} "
                f"(the file holds: {', '.join(names)})"
            )
        return dict(chosen[0])
    if len(found) > 1:
        raise ConfigError(
            f"{source}: {len(found)} {KIND} resources ({', '.join(names)}); choose one with "
            "--name NAME"
        )
    return dict(found[0])


def _resource_name(resource: Mapping) -> str:
    metadata = resource.get("metadata") or {}
    name = str(metadata.get("name", "<unnamed>"))
    return f"{metadata['namespace']}/{name}" if metadata.get("namespace") else name


@dataclass
class _Cluster:
    alias: str
    spec: Mapping
    where: str


@dataclass
class _Mirror:
    source: str
    target: str
    spec: Mapping
    where: str


class _Converter:
    """One conversion: collects the lines, the notes and the secrets it reads."""

    def __init__(self, resource: Mapping, secrets_dir: str) -> None:
        self.resource = resource
        self.secrets_dir = secrets_dir.rstrip("/") or "/"
        self.notes: list[str] = []
        self.secrets: dict[str, list[str]] = {}
        #: provider name as the resource's values use it -> the replicator's ("secret":
        #: a Kubernetes Secret through its mounted directory).
        self.providers = dict(_STRIMZI_PROVIDERS)
        #: flow -> the mirror that defines it.
        self.flows: dict[str, str] = {}

    # --- entry ------------------------------------------------------------------------

    def convert(self) -> Conversion:
        resource = self.resource
        api = str(resource.get("apiVersion", ""))
        group, _, version = api.rpartition("/")
        if resource.get("kind") != KIND or group != GROUP:
            raise ConfigError(
                f"apiVersion {api or '(none)'}, kind {resource.get('kind')}: not a Strimzi "
                f"{KIND} ({GROUP}/v1beta2 or {GROUP}/v1)"
            )
        if version not in ("v1", "v1beta2", "v1beta1", "v1alpha1"):
            raise ConfigError(
                f"apiVersion {api}: unknown version of {KIND}; v1beta2 and v1 are read"
            )
        spec = resource.get("spec")
        if not isinstance(spec, Mapping):
            raise ConfigError("spec: missing; a KafkaMirrorMaker2 needs spec.mirrors")
        clusters, mirrors = self._shape(spec)
        self._declared_providers(clusters)
        for key, value in spec.items():
            if key in ("clusters", "connectCluster", "target", "mirrors"):
                continue
            if key not in _SPEC_NOTES:
                raise _unknown(f"spec.{key}")
            self.notes.append(f"spec.{key}{_shown_value(key, value)}: {_SPEC_NOTES[key]}")
        body: list[str] = [f"clusters = {', '.join(clusters)}"]
        for cluster in clusters.values():
            body += ["", *self._cluster(cluster)]
        for mirror in mirrors:
            body += ["", *self._mirror(mirror)]
        name = _one_line(_resource_name(resource))
        api = _one_line(api)
        header = [
            f"# Converted from Strimzi {KIND} {name} ({api}) by `replicator import strimzi`.",
            f"# Secrets are read from files under {self.secrets_dir}: mount each Secret as the",
            "# directory of its name there (a Kubernetes Secret volume, Docker secrets).",
        ]
        for secret, keys in self.secrets.items():
            header.append(f"#   {self.secrets_dir}/{secret}/ with {', '.join(keys)}")
        if self.notes:
            header += ["#", "# Not mapped (nothing of the resource is dropped without a note):"]
            for note in self.notes:
                header += textwrap.wrap(
                    _one_line(note),
                    width=96,
                    initial_indent="# - ",
                    subsequent_indent="#   ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
        text = "\n".join([*header, "", *body]) + "\n"
        return Conversion(
            name=name,
            properties=text,
            notes=tuple(self.notes),
            secrets={secret: tuple(keys) for secret, keys in self.secrets.items()},
        )

    def _shape(self, spec: Mapping) -> tuple[dict[str, _Cluster], list[_Mirror]]:
        """The clusters by alias and the mirrors, from either API shape."""
        mirrors = [
            (f"spec.mirrors[{index}]", _mapping(item, f"spec.mirrors[{index}]"))
            for index, item in enumerate(_list(spec.get("mirrors"), "spec.mirrors"))
        ]
        if not mirrors:
            raise ConfigError("spec.mirrors: empty; nothing to replicate")
        if "target" in spec and ("clusters" in spec or "connectCluster" in spec):
            raise ConfigError(
                "spec.target and spec.clusters/connectCluster are both set: they are the v1 "
                "and the v1beta2 way of naming the clusters; keep one"
            )
        if "target" in spec:
            return self._shape_v1(spec, mirrors)
        return self._shape_v1beta2(spec, mirrors)

    def _shape_v1(
        self, spec: Mapping, mirrors: list[tuple[str, Mapping]]
    ) -> tuple[dict[str, _Cluster], list[_Mirror]]:
        """v1: `spec.target` and each mirror's `source`."""
        clusters: dict[str, _Cluster] = {}
        found: list[_Mirror] = []
        target_alias = self._add(clusters, _mapping(spec["target"], "spec.target"), "spec.target")
        for where, mirror in mirrors:
            if "source" not in mirror:
                raise ConfigError(f"{where}.source: required (the source cluster)")
            source = _mapping(mirror["source"], f"{where}.source")
            source_alias = self._add(clusters, source, f"{where}.source")
            for named, expected in (
                ("sourceCluster", source_alias),
                ("targetCluster", target_alias),
            ):
                if named in mirror and mirror[named] != expected:
                    raise ConfigError(
                        f"{where}.{named} = {mirror[named]}: contradicts the cluster "
                        f"{expected} the resource names there; remove {named}"
                    )
            found.append(_Mirror(source_alias, target_alias, mirror, where))
        # Sources first, as a reader of an MM2 file expects them.
        return {alias: clusters[alias] for alias in [*list(clusters)[1:], target_alias]}, found

    def _shape_v1beta2(
        self, spec: Mapping, mirrors: list[tuple[str, Mapping]]
    ) -> tuple[dict[str, _Cluster], list[_Mirror]]:
        """v1beta2: `spec.clusters` by alias, mirrors naming `sourceCluster`/`targetCluster`."""
        clusters: dict[str, _Cluster] = {}
        for index, item in enumerate(_list(spec.get("clusters"), "spec.clusters")):
            where = f"spec.clusters[{index}]"
            self._add(clusters, _mapping(item, where), where)
        if not clusters:
            raise ConfigError("spec.clusters: empty (and no spec.target): no cluster to connect")
        connect = spec.get("connectCluster")
        if connect is not None:
            if connect not in clusters:
                raise ConfigError(
                    f"spec.connectCluster = {connect}: no such alias in spec.clusters "
                    f"({', '.join(clusters)})"
                )
            self.notes.append(
                f"spec.connectCluster = {connect}: the cluster Kafka Connect keeps its state "
                "in; the replicator has no Connect cluster (its worker settings are comments)"
            )
        found = []
        for where, mirror in mirrors:
            if "source" in mirror:
                raise ConfigError(
                    f"{where}.source: the v1 way of naming the source cluster, used with "
                    "spec.clusters; use sourceCluster (v1beta2) or spec.target (v1)"
                )
            ends = [mirror.get("sourceCluster"), mirror.get("targetCluster")]
            for named, alias in zip(("sourceCluster", "targetCluster"), ends, strict=True):
                if alias not in clusters:
                    raise ConfigError(
                        f"{where}.{named} = {alias}: not an alias of spec.clusters "
                        f"({', '.join(clusters)})"
                    )
            if ends[0] == ends[1]:
                raise ConfigError(f"{where}: source and target are both {ends[0]}")
            found.append(_Mirror(str(ends[0]), str(ends[1]), mirror, where))
        return clusters, found

    def _add(self, clusters: dict[str, _Cluster], spec: Mapping, where: str) -> str:
        alias = spec.get("alias")
        if not isinstance(alias, str) or not alias:
            raise ConfigError(f"{where}.alias: required (the cluster's name in mm2.properties)")
        if re.search(r"[\s,#]|->", alias) or "." in alias:
            raise ConfigError(
                f"{where}.alias = {alias}: an MM2 alias cannot hold whitespace, ',', '#', '.' "
                "or '->' (it prefixes the keys); rename it"
            )
        known = clusters.get(alias)
        if known is not None:
            if dict(known.spec) != dict(spec):
                raise ConfigError(
                    f"{where}: alias {alias} is also {known.where}, with other settings; "
                    "give each cluster one alias and one definition"
                )
            return alias
        clusters[alias] = _Cluster(alias, spec, where)
        return alias

    # --- config providers -----------------------------------------------------------------

    def _declared_providers(self, clusters: Mapping[str, _Cluster]) -> None:
        """The providers the clusters' Connect configuration declares, by the name values
        use (`config.providers` = names, `config.providers.<name>.class`)."""
        for cluster in clusters.values():
            config = _mapping(cluster.spec.get("config") or {}, f"{cluster.where}.config")
            listed = config.get("config.providers")
            if listed is None:
                continue
            for name in (n.strip() for n in str(listed).split(",") if n.strip()):
                class_key = f"config.providers.{name}.class"
                class_name = config.get(class_key)
                if class_name not in _PROVIDER_CLASSES:
                    raise ConfigError(
                        f"{cluster.where}.config.{class_key} = {class_name}: the replicator "
                        "cannot run this config provider (it resolves ${env:...}, ${file:...} "
                        "and ${directory:...} itself); replace its references by hand"
                    )
                self.providers[name] = _PROVIDER_CLASSES[str(class_name)]

    def _value(self, value: Any, where: str) -> str:
        """A YAML scalar as a properties value, its config provider references rewritten to
        the providers the replicator resolves."""
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, float, str)):
            text = str(value)
        else:
            shown = "nothing" if value is None else f"a {type(value).__name__}"
            raise ConfigError(f"{where}: expected a string, number or boolean, got {shown}")
        return _REFERENCE.sub(lambda match: self._reference(match, where), text)

    def _reference(self, match: re.Match[str], where: str) -> str:
        provider, body = match.group(1), match.group(2)
        kind = self.providers.get(provider, provider if provider in _OURS else None)
        if kind is None:
            raise ConfigError(
                f"{where}: {match.group(0)} uses config provider {provider!r}, which the "
                "resource does not declare as a provider the replicator has (env, file, "
                "directory, Strimzi's Kubernetes Secret provider); write the value by hand"
            )
        if kind != "secret":
            if kind != provider:
                self.notes.append(
                    f"{where}: ${{{provider}:...}} became ${{{kind}:...}}; its path must exist "
                    "where the replicator runs"
                )
            return f"${{{kind}:{body}}}"
        path, colon, key = body.rpartition(":")
        secret = path.rpartition("/")[2]
        if not colon or not secret or not key:
            raise ConfigError(
                f"{where}: {match.group(0)}: expected ${{{provider}:<namespace>/<secret>:<key>}}"
            )
        return self._secret_reference(secret, key, where)

    def _secret_reference(self, secret: str, key: str, where: str) -> str:
        """`${directory:...}` for key `key` of Secret `secret`, mounted under the secrets dir."""
        self._uses(secret, key, where)
        return f"${{directory:{self.secrets_dir}/{secret}:{key}}}"

    def _secret_file(self, secret: str, key: str, where: str) -> str:
        """The path of key `key` of Secret `secret`, mounted under the secrets dir."""
        self._uses(secret, key, where)
        return f"{self.secrets_dir}/{secret}/{key}"

    def _uses(self, secret: str, key: str, where: str) -> None:
        for text, what in ((secret, "Secret name"), (key, "Secret key")):
            if not text or "/" in text or text in (".", "..") or re.search(r"[\s${}:]", text):
                raise ConfigError(
                    f"{where}: {what} {text!r} cannot be a file name under the secrets dir "
                    "(Kubernetes names and keys hold no '/', ':', '$', braces or whitespace)"
                )
        keys = self.secrets.setdefault(secret, [])
        if key not in keys:
            keys.append(key)

    # --- clusters ------------------------------------------------------------------------

    def _cluster(self, cluster: _Cluster) -> list[str]:
        alias, spec, where = cluster.alias, cluster.spec, cluster.where
        lines = [f"# cluster {alias} ({where})"]
        settings: dict[str, tuple[str, str]] = {}  # key -> (value, where it came from)

        def put(key: str, value: str, origin: str) -> None:
            if key in settings and settings[key][0] != value:
                raise ConfigError(
                    f"{origin} and {settings[key][1]} both set {alias}.{key}, differently; keep one"
                )
            settings[key] = (value, origin)

        known = ["alias", "bootstrapServers", "tls", "authentication", "config"]
        _known_fields(
            spec, [*known, *_TARGET_WORKER_FIELDS] if where == "spec.target" else known, where
        )
        bootstrap = spec.get("bootstrapServers")
        if not isinstance(bootstrap, str) or not bootstrap.strip():
            raise ConfigError(f"{where}.bootstrapServers: required (host:port, comma-separated)")
        put("bootstrap.servers", bootstrap.strip(), f"{where}.bootstrapServers")
        tls = spec.get("tls")
        if tls is not None:
            self._tls(alias, _mapping(tls, f"{where}.tls"), f"{where}.tls", put)
        protocol = "SSL" if tls is not None else "PLAINTEXT"
        authentication = spec.get("authentication")
        if authentication is not None:
            protocol = self._authentication(
                alias, _mapping(authentication, f"{where}.authentication"), where, tls, put
            )
        put("security.protocol", protocol, f"{where}.tls/authentication")
        comments: list[str] = []
        for field_name, worker_key in _TARGET_WORKER_FIELDS.items():
            if field_name in spec and worker_key in TARGET_CLUSTER_SETTINGS:
                # Read: where MM2's Connect keeps the committed offsets a takeover needs.
                origin = f"{where}.{field_name}"
                put(worker_key, self._value(spec[field_name], origin), origin)
            elif field_name in spec:
                comments.append(
                    f"# {alias}.{worker_key} = {_one_line(str(spec[field_name]))}: a Kafka "
                    "Connect worker setting (spec.target."
                    f"{field_name}); the replicator has no Connect cluster"
                )
        config = _mapping(spec.get("config") or {}, f"{where}.config")
        for key, raw in config.items():
            origin = f"{where}.config.{key}"
            if key == "config.providers" or key.startswith("config.providers."):
                comments.append(
                    f"# {alias}.{key}: a config provider declaration; the replicator resolves "
                    "${env:...}, ${file:...} and ${directory:...} itself (references rewritten)"
                )
                continue
            worker = None if key in TARGET_CLUSTER_SETTINGS else accepted_setting(key)
            if worker is not None and worker.scope == "worker":
                shown = "******" if is_sensitive(key) else _one_line(self._value(raw, origin))
                comments.append(
                    f"# {alias}.{key} = {shown}: a Kafka Connect worker setting, no meaning "
                    f"for the replicator: {worker.doc}"
                )
                continue
            put(key, self._value(raw, origin), origin)
        lines += [_entry(f"{alias}.{key}", value) for key, (value, _) in settings.items()]
        # One line each, whatever the resource's text holds: a comment never ends early.
        return lines + [f"# {_one_line(comment.removeprefix('# '))}" for comment in comments]

    def _tls(self, alias: str, tls: Mapping, where: str, put: Any) -> None:
        _known_fields(tls, ("trustedCertificates",), where)
        trusted = _list(tls.get("trustedCertificates"), f"{where}.trustedCertificates")
        if not trusted:
            self.notes.append(
                f"{where}: TLS without trustedCertificates: the brokers' certificates must be "
                f"signed by a CA the system trusts, or set {alias}.ssl.truststore.location"
            )
            return
        if len(trusted) > 1:
            raise ConfigError(
                f"{where}.trustedCertificates: {len(trusted)} certificates; a cluster of "
                "mm2.properties reads one PEM truststore file: put the certificates in one "
                "Secret key (cat a.crt b.crt > ca-bundle.crt) and name it, or set "
                f"{alias}.ssl.truststore.location by hand"
            )
        entry_where = f"{where}.trustedCertificates[0]"
        entry = _mapping(trusted[0], entry_where)
        _known_fields(entry, ("secretName", "certificate", "pattern"), entry_where)
        secret = entry.get("secretName")
        if not isinstance(secret, str) or not secret:
            raise ConfigError(f"{entry_where}.secretName: required (the Secret with the CA)")
        certificate = entry.get("certificate")
        pattern = entry.get("pattern")
        if certificate is None:
            if pattern != "*.crt":
                raise ConfigError(
                    f"{entry_where}: "
                    + (f"pattern {pattern!r} " if pattern is not None else "no certificate ")
                    + "cannot be mapped to one file; name it with certificate: <key of the "
                    f"Secret {secret}> (e.g. {CLUSTER_CA_CERTIFICATE})"
                )
            certificate = CLUSTER_CA_CERTIFICATE
            self.notes.append(
                f"{entry_where}.pattern '*.crt': read as {CLUSTER_CA_CERTIFICATE}, the "
                f"certificate of a Strimzi cluster CA Secret; if {secret} holds another "
                "name, change ssl.truststore.location"
            )
        elif pattern is not None:
            raise ConfigError(f"{entry_where}: certificate and pattern are both set; keep one")
        put("ssl.truststore.type", "PEM", entry_where)
        put(
            "ssl.truststore.location",
            self._secret_file(secret, str(certificate), entry_where),
            entry_where,
        )

    def _authentication(
        self, alias: str, authentication: Mapping, where: str, tls: Any, put: Any
    ) -> str:
        """Map `authentication`; the security protocol it gives."""
        auth_where = f"{where}.authentication"
        kind = authentication.get("type")
        if kind in _SASL:
            self._sasl(str(kind), authentication, auth_where, put)
            return "SASL_SSL" if tls is not None else "SASL_PLAINTEXT"
        if kind == "tls":
            if tls is None:
                raise ConfigError(
                    f"{auth_where}: type tls (mTLS) needs {where}.tls (the connection must be "
                    "TLS); add tls with the cluster's trusted certificate"
                )
            self._mtls(authentication, auth_where, put)
            return "SSL"
        if kind == "oauth":
            why = (
                "Strimzi's OAuth client settings (token endpoint, client secret, trusted "
                "certificates) have no one-to-one librdkafka form"
            )
        elif kind == "custom":
            why = "custom authentication is free-form Java client configuration"
        else:
            why = "unknown authentication type (known: tls, scram-sha-256, scram-sha-512, plain)"
        raise ConfigError(
            f"{auth_where}.type = {kind} (cluster {alias}): cannot be mapped: {why}; {_BY_HAND}"
        )

    def _sasl(self, kind: str, authentication: Mapping, where: str, put: Any) -> None:
        mechanism, module = _SASL[kind]
        _known_fields(authentication, ("type", "username", "passwordSecret"), where)
        username = authentication.get("username")
        if not isinstance(username, str) or not username:
            raise ConfigError(f"{where}.username: required for {kind}")
        secret_where = f"{where}.passwordSecret"
        password_secret = _mapping(authentication.get("passwordSecret"), secret_where)
        _known_fields(password_secret, ("secretName", "password"), secret_where)
        secret, password = password_secret.get("secretName"), password_secret.get("password")
        if not isinstance(secret, str) or not isinstance(password, str):
            raise ConfigError(
                f"{secret_where}: secretName and password (the key of the Secret) are required"
            )
        reference = self._secret_reference(secret, password, secret_where)
        put("sasl.mechanism", mechanism, where)
        put(
            "sasl.jaas.config",
            f'{module} required username="{_jaas_quoted(username)}" password="{reference}";',
            where,
        )

    def _mtls(self, authentication: Mapping, where: str, put: Any) -> None:
        _known_fields(authentication, ("type", "certificateAndKey"), where)
        pair_where = f"{where}.certificateAndKey"
        pair = _mapping(authentication.get("certificateAndKey"), pair_where)
        _known_fields(pair, ("secretName", "certificate", "key"), pair_where)
        secret, certificate, key = pair.get("secretName"), pair.get("certificate"), pair.get("key")
        if not (isinstance(secret, str) and isinstance(certificate, str) and isinstance(key, str)):
            raise ConfigError(f"{pair_where}: secretName, certificate and key are required")
        # librdkafka's names: a Java PEM keystore file wants the key and the chain in one file.
        put(
            "ssl.certificate.location",
            self._secret_file(secret, certificate, pair_where),
            pair_where,
        )
        put("ssl.key.location", self._secret_file(secret, key, pair_where), pair_where)

    # --- mirrors -----------------------------------------------------------------------

    def _mirror(self, mirror: _Mirror) -> list[str]:
        flow, spec, where = f"{mirror.source}->{mirror.target}", mirror.spec, mirror.where
        known = {
            "source",
            "sourceCluster",
            "targetCluster",
            *_CONNECTORS,
            "topicsPattern",
            "topicsExcludePattern",
            "topicsBlacklistPattern",
            "groupsPattern",
            "groupsExcludePattern",
            "groupsBlacklistPattern",
        }
        for key in spec:
            if key not in known:
                raise _unknown(f"{where}.{key}")
        if flow in self.flows:
            raise ConfigError(
                f"{where}: a second mirror {flow} (see {self.flows[flow]}); one flow per "
                "source and target: merge their patterns"
            )
        self.flows[flow] = where
        settings: dict[str, tuple[str, str]] = {}

        def put(key: str, value: str, origin: str) -> None:
            if key in settings and settings[key][0] != value:
                raise ConfigError(
                    f"{origin} = {_shown(key, value)} and {settings[key][1]} = "
                    f"{_shown(key, settings[key][0])} differ; the replicator has one "
                    f"{flow}.{key}: make them equal or keep one"
                )
            settings.setdefault(key, (value, origin))

        put("enabled", "true", where)
        for base in ("topics", "groups"):
            if f"{base}Pattern" in spec:
                origin = f"{where}.{base}Pattern"
                put(base, self._value(spec[f"{base}Pattern"], origin), origin)
            exclude = f"{base}ExcludePattern"
            blacklist = f"{base}BlacklistPattern"
            for named in (exclude, blacklist):
                if named in spec:
                    origin = f"{where}.{named}"
                    put(f"{base}.exclude", self._value(spec[named], origin), origin)
        if "sourceConnector" not in spec:
            raise ConfigError(
                f"{where}: no sourceConnector, so Strimzi copies no records for {flow}; a "
                "replicator flow always copies them: add sourceConnector: {} or remove the mirror"
            )
        for connector in _CONNECTORS:
            if connector in spec:
                self._connector(flow, connector, spec[connector], f"{where}.{connector}", put)
            elif connector == "checkpointConnector":
                self.notes.append(
                    f"{where}: no checkpointConnector, so Strimzi wrote no checkpoints for "
                    f"{flow}; the replicator does by default (set {flow}.emit.checkpoints.enabled "
                    "= false to match)"
                )
            elif connector == "heartbeatConnector" and "sourceCluster" in spec:
                self.notes.append(
                    f"{where}: no heartbeatConnector, so Strimzi emitted no heartbeats for "
                    f"{flow}; the replicator does by default (set {flow}.emit.heartbeats.enabled "
                    "= false to match)"
                )
        return [f"# mirror {flow} ({where})"] + [
            _entry(f"{flow}.{key}", value) for key, (value, _) in settings.items()
        ]

    def _connector(self, flow: str, connector: str, raw: Any, where: str, put: Any) -> None:
        spec = _mapping(raw if raw is not None else {}, where)
        for key, value in spec.items():
            if key == "config":
                config = _mapping(value or {}, f"{where}.config")
                for setting, setting_value in config.items():
                    origin = f"{where}.config.{setting}"
                    put(setting, self._value(setting_value, origin), origin)
            elif key == "tasksMax" and connector == "sourceConnector":
                put("tasks.max", self._value(value, f"{where}.tasksMax"), f"{where}.tasksMax")
            else:
                self._connector_field(flow, connector, key, value, where)

    def _connector_field(self, flow: str, connector: str, key: str, value: Any, where: str) -> None:
        """A connector field that is not mapped: noted, or refused when unknown."""
        if key == "tasksMax":
            what = "checkpoints" if connector == "checkpointConnector" else "heartbeats"
            note = f"the replicator's {what} of a flow run in one loop per worker, not as tasks"
        elif (key, value) in (("pause", True), ("state", "paused"), ("state", "stopped")):
            note = (
                f"the replicator has no paused connector; {flow} is written enabled: set "
                f"{flow}.enabled = false, or start the replicator only when it should copy"
            )
        elif (key, value) in (("pause", False), ("state", "running")):
            return
        elif key in ("pause", "state"):
            raise ConfigError(f"{where}.{key} = {value}: unknown; running, paused or stopped")
        elif key == "autoRestart":
            note = (
                "the replicator's workers are restarted by their restart policy and the "
                "replicator_supervisor DAG"
            )
        elif key in ("listOffsets", "alterOffsets"):
            note = (
                "Kafka Connect's offsets; the replicator keeps its position on the target "
                "(see `replicator offsets` and `replicator migrate`)"
            )
        elif key == "version":
            note = "a Connect plugin version; the replicator has no plugins"
        else:
            raise _unknown(f"{where}.{key}")
        self.notes.append(f"{where}.{key}{_shown_value(key, value)}: {note}")


def convert(resource: Mapping, *, secrets_dir: str = DEFAULT_SECRETS_DIR) -> Conversion:
    """Convert one parsed KafkaMirrorMaker2 resource (a dict as YAML gives it)."""
    return _Converter(resource, secrets_dir).convert()


# --- helpers ---------------------------------------------------------------------------


def _known_fields(spec: Mapping, known: Iterable[str], where: str) -> None:
    """Refuse a field of `spec` that is not in `known`: nothing is dropped in silence."""
    for key in spec:
        if key not in known:
            raise _unknown(f"{where}.{key}")


def _unknown(where: str) -> ConfigError:
    return ConfigError(
        f"{where}: not a field this converter knows, so it cannot say what it means for the "
        "replicator; remove it from the resource you convert and set its equivalent by hand"
    )


def _mapping(value: Any, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        shown = "nothing" if value is None else f"a {type(value).__name__}"
        raise ConfigError(f"{where}: expected a mapping, got {shown}")
    return value


def _list(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list, got a {type(value).__name__}")
    return value


def _shown_value(key: str, value: Any) -> str:
    """` = value` for a note on a scalar field (never a secret's), else nothing."""
    if is_sensitive(key):
        return ""
    if isinstance(value, bool):
        return f" = {'true' if value else 'false'}"
    if isinstance(value, (str, int, float)):
        return f" = {value}"
    return ""


def _shown(key: str, value: str) -> str:
    return "******" if is_sensitive(key) else repr(value)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _jaas_quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}


def _escape(text: str, *, key: bool) -> str:
    """`text` as `java.util.Properties.store` writes it (ASCII, \\uXXXX beyond)."""
    out = []
    for position, char in enumerate(text):
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif (key and char in " =:#!") or (position == 0 and char in " #!"):
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) > 0x7E:
            encoded = char.encode("utf-16-be")
            out.extend(
                f"\\u{int.from_bytes(encoded[i : i + 2], 'big'):04x}"
                for i in range(0, len(encoded), 2)
            )
        else:
            out.append(char)
    return "".join(out)


def _entry(key: str, value: str) -> str:
    return f"{_escape(key, key=True)} = {_escape(value, key=False)}"
