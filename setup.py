"""The package's compiled modules; everything else is in pyproject.toml.

1. `replicator/engine/native_spans.c`, the replication loop's hot path today.
2. `replicator._dataplane`, the data plane in Rust (dataplane/, docs/dataplane.md),
   built by setuptools-rust with librdkafka from rdkafka-sys's vendored source. Cargo
   builds into ~/.cache/replicator/cargo-target (CARGO_TARGET_DIR overrides), which
   outlives the clone, so a second clone does not compile librdkafka again. Also
   optional: without cargo (or setuptools-rust) the package installs without it,
   says so in a banner, and the Python loop stays what runs; REPLICATOR_REQUIRE_RUST=1
   makes its absence fail the build instead.

Optional: without a C compiler the package still installs, and the loop runs in
Python alone (`replicator.engine.spans` logs that at start). But never quietly: the
C part is compiled with `-Werror`, so a warning from a newer compiler fails it too,
and a failed build says so in a banner on stderr and in
`replicator/engine/native_spans.build-error.txt` (the compiler's own words), which
the test that requires the C part (tests/unit/engine/test_native_built.py) prints:
`make test` fails unless REPLICATOR_PURE_PYTHON=1 says the C part is meant to be
absent. REPLICATOR_REQUIRE_C=1 makes the build itself fail instead.
"""

import hashlib
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_SOURCE = "replicator/engine/native_spans.c"
#: Compiled into the module: the test that requires it tells a stale build from this source.
_SOURCE_SHA256 = hashlib.sha256((Path(__file__).parent / _SOURCE).read_bytes()).hexdigest()
#: What the last failed build of the C part said; removed by a build that succeeds.
_ERROR_FILE = Path(__file__).parent / "replicator/engine/native_spans.build-error.txt"


class _LoudBuildExt(build_ext):
    """build_ext whose optional C part, when it does not build, says so loudly."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            message = (
                f"{ext.name} ({_SOURCE}) was NOT built: {exc}\n"
                "The replication loop will run in Python alone, about half as fast at "
                "100 B records. Compiler warnings count as errors (-Werror): fix the "
                "source, or install the compiler and Python headers, then run "
                "`make setup` again. `make test` fails until then, unless "
                "REPLICATOR_PURE_PYTHON=1 says the C part is meant to be absent. The "
                "compiler's messages: `.venv/bin/python setup.py build_ext --inplace`."
            )
            banner = "!" * 78
            sys.stderr.write(f"\n{banner}\n{message}\n{banner}\n\n")
            try:
                _ERROR_FILE.write_text(message + "\n")
            except OSError as write_error:
                sys.stderr.write(f"(could not write {_ERROR_FILE}: {write_error})\n")
            # A module built from an earlier source must not be left to be imported.
            suffix = sysconfig.get_config_var("EXT_SUFFIX")
            for stale in {
                Path(self.get_ext_fullpath(ext.name)),
                Path(__file__).parent / f"replicator/engine/_native_spans{suffix}",
            }:
                stale.unlink(missing_ok=True)
            raise
        _ERROR_FILE.unlink(missing_ok=True)


_DATAPLANE = "dataplane/Cargo.toml"


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


setup(
    rust_extensions=_rust_extensions(),
    cmdclass={"build_ext": _LoudBuildExt},
    ext_modules=[
        Extension(
            "replicator.engine._native_spans",
            [_SOURCE],
            extra_compile_args=["-O2", "-Wall", "-Werror"],
            define_macros=[("NATIVE_SPANS_SOURCE_SHA256", f'"{_SOURCE_SHA256}"')],
            optional=os.environ.get("REPLICATOR_REQUIRE_C") != "1",
        )
    ],
)
