"""The suites' process: `python -m replicator_expectations.launch ARGS` runs `report`
(with ARGS) as `python -m replicator_expectations.report` would, importing less of what
GX imports, and can be started before its run is planned (`main`).

GX's import is most of a run's suites phase (4 s of a run with nothing new, before
this): it imports, for features the suites never use,
- PySpark and pyspark.ml (Spark data sources; the suites read Parquet with pandas) and
  SQLAlchemy (SQL data sources): left out. `None` in `sys.modules` makes their import
  fail in this process (Python's import protocol), so GX takes them as not installed;
- SciPy's statistics and Altair (distribution expectations and their charts, which the
  suites do not use): loaded when first used (`importlib.util.LazyLoader`), never here.

Only this process: the Airflow worker or a test that imports `report` imports GX whole.
`report` does not depend on it (run as its own module, it imports GX whole too)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from types import ModuleType

#: What GX imports and the suites never use.
LEFT_OUT = ("pyspark", "sqlalchemy")
#: What GX imports at its start and uses only in expectations the suites do not have.
DEFERRED = ("scipy.stats", "altair")
REPORT = "replicator_expectations.report"
#: The argument that starts the process ahead of its run (`main`).
AHEAD = "--ahead"


class _Deferred(importlib.abc.MetaPathFinder):
    """Finds `names` as the other finders do, with a loader that runs each module
    when one of its attributes is first read."""

    def __init__(self, names: Sequence[str]) -> None:
        self._names = frozenset(names)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = importlib.util.LazyLoader(spec.loader)
                return spec
        return None


def lighten() -> None:
    """This process imports from now on neither `LEFT_OUT` nor, until used, `DEFERRED`."""
    for name in LEFT_OUT:
        sys.modules[name] = None  # type: ignore[assignment]
    sys.meta_path.insert(0, _Deferred(DEFERRED))


def main() -> int:
    """`report`'s exit code. With the one argument `AHEAD`, the process imports GX
    first and then reads `report`'s arguments as a JSON list from its standard input
    (`replicator verify` starts it before planning, so the import overlaps the plan and
    the job); an empty input (the run ended before its suites) exits at once, 0."""
    lighten()
    report = importlib.import_module(REPORT)
    if sys.argv[1:] == [AHEAD]:
        line = sys.stdin.readline()
        if not line.strip():
            return 0
        sys.argv[1:] = [str(argument) for argument in json.loads(line)]
    return int(report.main())


def exit_now(code: int) -> None:
    """End the process with `code` without Python's teardown: what the suites write
    (summary.json, the validation results, the Data Docs) is closed by then, and
    tearing down what GX imports (pandas, GX's thousand modules) took 0.45 s of a
    2.5 s process, a sixth of a run with nothing new."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
