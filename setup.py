"""The package's one compiled module, the replication loop's hot path
(`replicator/engine/native_spans.c`); everything else is in pyproject.toml.

Optional: without a C compiler the package still installs, and the loop runs in
Python alone (`replicator.engine.spans` logs that at start)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "replicator.engine._native_spans",
            ["replicator/engine/native_spans.c"],
            extra_compile_args=["-O2", "-Wall", "-Werror"],
            optional=True,
        )
    ]
)
