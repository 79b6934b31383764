"""Where the verification's Spark job and GX suites are, in the installed distribution.

They are the packages `replicator_spark` and `replicator_expectations`, shipped beside
`replicator` (which never imports Spark or GX, so it names them and runs them as
processes of their own). Found through the import system, not the checkout: the same
lookup works in a checkout (editable install), a wheel install and the image.

On a Spark cluster that does not run this project's environment, the executors
unpickle the job's UDFs, which import `replicator.engine.formats` (standard library
only). `py_files` zips the pure-Python packages for `spark-submit --py-files`, so
those executors need nothing but PySpark; the driver runs where `spark-submit` does
(client mode), with the project installed.
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

from replicator.errors import ReplicatorError

#: The PySpark job, run as `spark-submit <its file>`.
SPARK_JOB = "replicator_spark.verify"
#: The suites (`replicator_expectations.report`), run as `python -m` of this module,
#: which runs them with less of GX imported.
SUITES_LAUNCHER = "replicator_expectations.launch"
#: Its one argument when started before its run is planned
#: (`replicator_expectations.launch.AHEAD`; the arguments follow on its input).
SUITES_AHEAD = "--ahead"
#: The job's, on a verification server (`replicator_spark.verify.AHEAD`).
JOB_AHEAD = "--ahead"
#: The packages the executors import, zipped for `--py-files`.
EXECUTOR_PACKAGES = ("replicator", "replicator_spark")
PY_FILES_NAME = "verification-packages.zip"


def spark_application() -> Path:
    """The job's file, for `spark-submit`."""
    return Path(_origin(SPARK_JOB))


def py_files(directory: Path) -> Path:
    """Zip `EXECUTOR_PACKAGES` (their `.py` files) into `directory` for `--py-files`."""
    archive = directory / PY_FILES_NAME
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for package in EXECUTOR_PACKAGES:
            root = Path(_origin(package)).parent
            for source in sorted(root.rglob("*.py")):
                out.write(source, Path(package) / source.relative_to(root))
    return archive


def _origin(module: str) -> str:
    """The file of `module` (found, not imported: `replicator` never imports Spark)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ReplicatorError(
            f"{module} is not installed; install the replicator distribution "
            "(pip install 'replicator[spark,gx]'), not only its `replicator` folder"
        )
    return spec.origin
