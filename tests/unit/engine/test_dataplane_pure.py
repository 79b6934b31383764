"""The data plane's pure parts (dataplane/src/ledger.rs, plan.rs: the delivery
ledger, the irregular-record check, the redaction of settings in messages) by their
Rust unit tests, so `make test` runs them: `cargo test --no-default-features`
builds neither librdkafka nor the Python module, only the crate's pure modules.
Skipped where cargo is absent (the package then installs without the data plane)."""

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
