"""The package tree is the architecture (issue 13): imports go one way, and never in a circle.

Every module of `replicator/` belongs to one layer of `LAYERS` and may import only
modules of its own layer or of a lower one: foundation modules (`errors`, `backoff`,
`metrics`) -> `config` -> `kafka` -> `statestore` -> `engine` -> `offsets` ->
`operations`/`procedures`/`verification`/`acls` -> `cli` -> `__main__`. So the
engine never imports the procedures or the operations tooling, and nothing but
`python -m replicator` imports the CLI. Function-level imports count like the others:
deferring an import hides a circle from Python at import time, not from a reader
(imports under `if TYPE_CHECKING:` count for the direction, not for circles: they are
never run). No
module of `replicator/` imports Airflow, Spark or Great Expectations, and `dags/` and
`plugins/` import only what a package re-exports (its `__init__`) or a foundation
module. Reading the source with `ast` takes well under a second and needs no Kafka.

A module that fits no layer fails the test: place it in a package (or add it to
`LAYERS` with the reason) rather than let it sit between layers.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Lowest first. A module belongs to the entry that names it or, failing that, its
#: nearest package (the root package `replicator` only as itself).
LAYERS: list[tuple[str, ...]] = [
    (
        "replicator",
        "replicator.errors",
        "replicator.backoff",
        "replicator.metrics",
        "replicator.logs",
        "replicator.flow_timer",
        "replicator.probe",
        "replicator.allocator",
        "replicator.listing",
    ),
    ("replicator.config",),
    # Who a cluster's clients are to its authorizer (config only): the engine names it in errors.
    ("replicator.kafka", "replicator.acls.principal"),
    ("replicator.statestore",),
    ("replicator.engine",),
    ("replicator.offsets",),
    (
        "replicator.operations",
        "replicator.procedures",
        "replicator.verification",
        "replicator.acls",  # the ACLs the replicator needs; the secured local stack applies them
        "replicator.reports",  # documents of the history's runs; reads the procedures' records
        "replicator.init",  # `replicator init`: checks and prepares clusters and the store
    ),
    ("replicator.cli",),
    ("replicator.__main__",),
]
#: Libraries that run in processes of their own (DAGs, Spark jobs, GX suites), never in ours.
FOREIGN = ("airflow", "pyspark", "great_expectations")


def module_files(package_dir: Path) -> dict[str, Path]:
    """Every module of the package under `package_dir`, by dotted name."""
    base = package_dir.parent
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(base).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


class Import(NamedTuple):
    line: int
    #: The module the statement names: `a.b` in `from a.b import c` and in `import a.b`.
    named: str
    #: The most precise module it imports: `a.b.c` when that is a module, else `named`.
    module: str
    #: Under `if TYPE_CHECKING:`: for annotations only, never imported at run time.
    typing_only: bool


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import statement of the module `name` (file `path`), at any depth."""
    found: list[Import] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(node.lineno, a.name, a.name, typing_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                anchor = package[: len(package) - node.level + 1]
                named = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                named = node.module or ""
            for alias in node.names:
                candidate = f"{named}.{alias.name}"
                module = candidate if candidate in modules else named
                found.append(Import(node.lineno, named, module, typing_only))
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only or _is_type_checking_body(node, child))

    visit(_tree(path), typing_only=False)
    return sorted(set(found))


_TREES: dict[Path, ast.Module] = {}


def _tree(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per session (the checks share them)."""
    if path not in _TREES:
        _TREES[path] = ast.parse(path.read_text(), str(path))
    return _TREES[path]


def _is_type_checking_body(node: ast.AST, child: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not any(child is line for line in node.body):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph(package_dir: Path) -> dict[str, list[Import]]:
    """module -> its imports of other modules of the package."""
    modules = module_files(package_dir)
    return {
        name: [found for found in imports_of(name, path, modules) if found.module in modules]
        for name, path in modules.items()
    }


def circles(graph: dict[str, list[Import]]) -> list[list[str]]:
    """The import circles of `graph`: each strongly connected set of modules (Tarjan),
    or a module that imports itself, sorted. Imports for annotations only (under
    `if TYPE_CHECKING:`) run at no time, so they close no circle."""
    edges = {
        module: sorted({found.module for found in deps if not found.typing_only})
        for module, deps in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for dep in edges.get(module, []):
            if dep not in index:
                visit(dep)
                low[module] = min(low[module], low[dep])
            elif dep in on_stack:
                low[module] = min(low[module], index[dep])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in edges.get(module, []):
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(found)


def layer_of(module: str, layers: list[tuple[str, ...]] = LAYERS) -> int | None:
    """Rank of the layer `module` belongs to (the most specific name wins), None if none."""
    best: tuple[int, int] | None = None  # (length of the matching name, rank)
    for rank, names in enumerate(layers):
        for name in names:
            within = "." in name and module.startswith(name + ".")  # the root only as itself
            if (module == name or within) and (best is None or len(name) > best[0]):
                best = (len(name), rank)
    return None if best is None else best[1]


def crossings(graph: dict[str, list[Import]], layers: list[tuple[str, ...]] = LAYERS) -> list[str]:
    """Modules outside every layer, and imports of a higher layer than the importer's."""
    problems = []
    for module, deps in sorted(graph.items()):
        rank = layer_of(module, layers)
        if rank is None:
            problems.append(f"{module}: in no layer; move it into a package of LAYERS (or add one)")
            continue
        for line, dep in sorted({(found.line, found.module) for found in deps}):
            dep_rank = layer_of(dep, layers)
            if dep_rank is not None and dep_rank > rank:
                problems.append(
                    f"{module}:{line} imports {dep}, a higher layer ({layers[dep_rank][0]} "
                    f"over {layers[rank][0]}); move the shared part down or invert the call"
                )
    return problems


def foreign_imports(package_dir: Path) -> list[str]:
    """Imports of Airflow, Spark or GX anywhere in the package."""
    modules = module_files(package_dir)
    return [
        f"{name}:{found.line} imports {found.named}"
        for name, path in sorted(modules.items())
        for found in imports_of(name, path, modules)
        if found.named.split(".")[0] in FOREIGN
    ]


def non_public_imports(folder: Path, package_dir: Path) -> list[str]:
    """Imports in `folder` (DAGs, plugins) of a `replicator` module that is neither a
    package (what it re-exports is public) nor a foundation module, or of the CLI."""
    modules = module_files(package_dir)
    public = {name for name, path in modules.items() if path.name == "__init__.py"}
    public |= set(LAYERS[0])
    problems = []
    for path in sorted(folder.rglob("*.py")):
        for found in imports_of(path.stem, path, modules):
            named = found.named
            if named.split(".")[0] == "replicator" and (
                named not in public or named == "replicator.cli"
            ):
                problems.append(f"{path.relative_to(folder.parent)}:{found.line} imports {named}")
    return problems


# -- the package as it is ------------------------------------------------------------------


@pytest.mark.parametrize(
    "package", ["replicator", "plugins/replicator_airflow", "lab/replicator_lab"]
)
def test_no_import_circle(package: str) -> None:
    found = circles(import_graph(ROOT / package))
    assert not found, f"import circles (break each by moving the shared part down): {found}"


def test_imports_go_down_the_layers() -> None:
    problems = crossings(import_graph(ROOT / "replicator"))
    assert not problems, "\n".join(problems)


#: Where the product's code lives: the packages of the wheel, and the DAGs.
PRODUCT = ("replicator", "plugins", "spark", "expectations", "dags")
#: The lab (the local stack): above the product, which never imports it.
LAB = "replicator_lab"


def lab_imports(folder: Path) -> list[str]:
    """Imports of the lab anywhere under `folder`, at any depth (typing-only included:
    the wheel must not even name a module it does not hold)."""
    return [
        f"{path.relative_to(ROOT)}:{found.line} imports {found.named}"
        for path in sorted(folder.rglob("*.py"))
        for found in imports_of(path.stem, path, {})
        if found.named.split(".")[0] == LAB
    ]


def test_the_product_never_imports_the_lab() -> None:
    problems = [problem for folder in PRODUCT for problem in lab_imports(ROOT / folder)]
    assert not problems, "move what the product needs out of the lab:\n" + "\n".join(problems)


def test_the_lab_sits_outside_the_product_package() -> None:
    assert not (ROOT / "replicator" / "localstack").exists()
    assert (ROOT / "lab" / LAB / "__init__.py").is_file()


def test_the_replicator_never_imports_airflow_spark_or_gx() -> None:
    problems = foreign_imports(ROOT / "replicator")
    assert not problems, "\n".join(problems)


def test_dags_and_plugins_import_only_re_exported_names() -> None:
    problems = [
        *non_public_imports(ROOT / "dags", ROOT / "replicator"),
        *non_public_imports(ROOT / "plugins", ROOT / "replicator"),
    ]
    assert not problems, "re-export the name from the package's __init__:\n" + "\n".join(problems)


# -- the checks catch what they are for ------------------------------------------------------


def _package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "replicator"


def test_the_circle_of_the_flat_layout_is_found(tmp_path: Path) -> None:
    """The circle issue 13 found (at 41d8c6e): the runner imported the desired flow states
    from the procedures, and the resets module imported `live_workers` from them inside a
    function to hide the circle from Python."""
    package = _package(
        tmp_path,
        {
            "replicator/__init__.py": "",
            "replicator/procedures/__init__.py": "",
            "replicator/procedures/flows.py": "from replicator.runner import RUNNING\n",
            "replicator/runner.py": "from replicator.task import ReplicationTask\n",
            "replicator/task.py": "from replicator.resets import PendingResets\n",
            "replicator/resets.py": (
                "def request_reset():\n    from replicator.procedures.flows import live_workers\n"
            ),
            "replicator/errors.py": "",
        },
    )
    assert circles(import_graph(package)) == [
        [
            "replicator.procedures.flows",
            "replicator.resets",
            "replicator.runner",
            "replicator.task",
        ]
    ]


def test_an_upward_import_is_found(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "replicator/__init__.py": "",
            "replicator/engine/__init__.py": "",
            "replicator/engine/task.py": "from .. import procedures\n",
            "replicator/procedures/__init__.py": "from replicator.engine import task\n",
            "replicator/loose.py": "",
        },
    )
    problems = crossings(import_graph(package))
    assert len(problems) == 2
    assert problems[0].startswith("replicator.engine.task:1 imports replicator.procedures,")
    assert problems[1].startswith("replicator.loose: in no layer")
    assert circles(import_graph(package)) == [["replicator.engine.task", "replicator.procedures"]]
