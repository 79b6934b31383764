"""The data plane's pure parts (dataplane/src/ledger.rs, plan.rs: the delivery
ledger, the irregular-record check, the redaction of settings in messages) by their
Rust unit tests, so `make test` runs them: `cargo test --no-default-features`
builds neither librdkafka nor the Python module, only the crate's pure modules.
And the built module's dynamic symbols (only PyInit__dataplane: librdkafka stays
local to it). Skipped where cargo is absent (the package then installs without the
data plane)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

MANIFEST = Path(__file__).resolve().parents[3] / "dataplane" / "Cargo.toml"


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is absent")
def test_the_rust_unit_tests_pass() -> None:
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache/replicator/cargo-target"))
    run = subprocess.run(
        ["cargo", "test", "--no-default-features", "--manifest-path", str(MANIFEST)],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
        check=False,
    )
    assert run.returncode == 0, f"cargo test failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    assert "test result: ok" in run.stdout


def test_the_module_exports_only_its_init() -> None:
    """librdkafka is linked into the module statically and kept local: the dynamic
    symbol table defines PyInit__dataplane alone, so its rd_kafka_* can neither
    interpose on confluent-kafka's librdkafka in the same process nor be interposed."""
    try:
        from replicator import _dataplane  # noqa: PLC0415
    except ImportError:
        if shutil.which("cargo") is not None:
            raise
        pytest.skip("cargo is absent: the data plane is not built here")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is absent")
    run = subprocess.run(
        [nm, "-D", "--defined-only", _dataplane.__file__],
        capture_output=True,
        text=True,
        check=True,
    )
    names = [line.split()[-1] for line in run.stdout.splitlines() if line.strip()]
    assert names == ["PyInit__dataplane"], names
    undefined = subprocess.run(
        [nm, "-D", "--undefined-only", _dataplane.__file__],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "rd_kafka_" not in undefined
