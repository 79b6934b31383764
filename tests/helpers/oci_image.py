"""An OCI image archive holding one static binary, for a container runtime that can pull
nothing (no registry of images answers here): the test node's pod sandbox ("pause")
image is made this way from the binary `make setup` builds (tools/k8s/pause/).

The archive is an OCI image layout in a tar file (`oci-layout`, `index.json`, `blobs/`),
which `ctr images import` reads; the image's name is the index's
`io.containerd.image.name` annotation, so containerd stores it under exactly that name.
One uncompressed layer holds the binary at `/<name>`, which is the image's entrypoint.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import tarfile
from pathlib import Path

_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_LAYER = "application/vnd.oci.image.layer.v1.tar"
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def _descriptor(media_type: str, data: bytes) -> dict:
    return {
        "mediaType": media_type,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
    }


def _json(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _layer(binary: Path) -> bytes:
    """A tar holding `binary` at the root, owned by root, mode 0755."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        data = binary.read_bytes()
        info = tarfile.TarInfo(binary.name)
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def single_binary_image(binary: Path, name: str, archive: Path) -> Path:
    """Write to `archive` an OCI image named `name` (e.g. `localhost/x/pause:1.0`) whose
    only file and entrypoint is `binary`; returns `archive`."""
    layer = _layer(binary)
    config = _json(
        {
            "architecture": _ARCH,
            "os": "linux",
            "config": {"Entrypoint": [f"/{binary.name}"]},
            "rootfs": {"type": "layers", "diff_ids": [_descriptor(_LAYER, layer)["digest"]]},
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": _descriptor(_CONFIG, config),
            "layers": [_descriptor(_LAYER, layer)],
        }
    )
    index = _json(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    **_descriptor(_MANIFEST, manifest),
                    "platform": {"architecture": _ARCH, "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
    )
    files = {"oci-layout": _json({"imageLayoutVersion": "1.0.0"}), "index.json": index}
    for blob in (layer, config, manifest):
        files["blobs/sha256/" + hashlib.sha256(blob).hexdigest()] = blob
    with tarfile.open(archive, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return archive
