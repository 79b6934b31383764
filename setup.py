"""The package's compiled module; everything else is in pyproject.toml.

`replicator._dataplane`, the data plane in Rust (dataplane/, docs/dataplane.md), built
by setuptools-rust with librdkafka from rdkafka-sys's vendored source. Cargo builds
into ~/.cache/replicator/cargo-target (CARGO_TARGET_DIR overrides), which outlives the
clone, so a second clone does not compile librdkafka again. Optional: without cargo
(or setuptools-rust) the package installs without it, says so in a banner, and the
Python loop is what runs (the engine says so in its log, `replicator_data_path` and
`replicator status`); REPLICATOR_REQUIRE_RUST=1 makes its absence fail the build
instead. REPLICATOR_DATAPLANE_LIB=PATH packs a library cargo built elsewhere
(`lib_dataplane.so`, the Docker image's dataplane stage) instead of building it here.

There is no C extension: the package reads no other extension's structures.
"""

import os
import shutil
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

_DATAPLANE = "dataplane/Cargo.toml"
_PREBUILT_ENV = "REPLICATOR_DATAPLANE_LIB"
#: Where the module lives in the package (setuptools-rust's name for an abi3 module).
_MODULE_FILE = "replicator/_dataplane.abi3.so"


def _prebuilt() -> Path | None:
    """The library REPLICATOR_DATAPLANE_LIB names, to pack, or None when it is unset."""
    named = os.environ.get(_PREBUILT_ENV)
    if not named:
        return None
    library = Path(named)
    if not library.is_file():
        raise RuntimeError(
            f"{_PREBUILT_ENV}={named}: no such file; build it with `cargo build --release "
            f"--features extension-module --manifest-path {_DATAPLANE}` "
            "(target/release/lib_dataplane.so) or unset it to build here"
        )
    return library


class _WithCompiledModule(Distribution):
    """A distribution whose wheel carries a compiled module built outside setuptools:
    tagged for the platform, not as pure Python."""

    def has_ext_modules(self) -> bool:
        return True


class _PackPrebuilt(build_py):
    """build_py that also copies the prebuilt library into the package."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / _MODULE_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_PREBUILT, target)


def _banner(message: str) -> None:
    banner = "!" * 78
    sys.stderr.write(f"\n{banner}\n{message}\n{banner}\n\n")


def _rust_extensions() -> list:
    """The data plane's extension, or none (said in a banner) when it cannot be built
    here and REPLICATOR_REQUIRE_RUST is not 1."""
    required = os.environ.get("REPLICATOR_REQUIRE_RUST") == "1"
    missing = None
    try:
        from setuptools_rust import Binding, RustExtension  # noqa: PLC0415
    except ImportError as exc:
        missing = f"setuptools-rust is not installed ({exc}); pip installs it from pyproject.toml"
    if missing is None and shutil.which("cargo") is None:
        missing = "cargo is not on PATH (install Rust: https://rustup.rs)"
    if missing is not None:
        message = (
            f"replicator._dataplane ({_DATAPLANE}) was NOT built: {missing}. The "
            "replication loop runs without the compiled data plane."
        )
        if required:
            raise RuntimeError(message + " REPLICATOR_REQUIRE_RUST=1 asks for it.")
        _banner(message)
        return []
    # Outlives the clone: librdkafka (minutes on 2 cores) is compiled once per machine.
    os.environ.setdefault(
        "CARGO_TARGET_DIR", str(Path.home() / ".cache" / "replicator" / "cargo-target")
    )
    return [
        RustExtension(
            "replicator._dataplane",
            path=_DATAPLANE,
            binding=Binding.PyO3,
            features=["extension-module"],
            py_limited_api=True,
            debug=False,
            optional=not required,
        )
    ]


_PREBUILT = _prebuilt()

if _PREBUILT is None:
    setup(rust_extensions=_rust_extensions())
else:
    setup(distclass=_WithCompiledModule, cmdclass={"build_py": _PackPrebuilt})
