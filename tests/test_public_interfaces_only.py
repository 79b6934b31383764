"""No code of the project reads another extension's private structures (issue 29).

The replication loop's hot path was once a C module that declared confluent-kafka's
`Message` and `Handle` structures by hand (a copy of `PyObject_HEAD` and the fields
after it) and read the producer's librdkafka handle at an offset: any confluent-kafka
release could change that layout under the same interface. The rules that keep it out:

- no C or C++ source (or Cython) in the Python packages, and `setup.py` builds no
  `Extension`: the one compiled module is the Rust data plane;
- the Rust data plane declares no foreign layout or symbol by hand: no `#[repr(C)]`
  type and no `extern "C" { ... }` block (librdkafka's functions and types come from
  rdkafka-sys, generated from `rdkafka.h`; `extern "C" fn` callbacks it *defines*
  are fine), and it names no CPython object internals (`ob_refcnt`, `ob_type`,
  `PyObject_HEAD`) and nothing of confluent-kafka's;
- Python code does not read memory through ctypes (`cast`, `from_address`,
  `string_at`, `pythonapi`, ...): calling a C library's public function (libc's
  `prctl`) is allowed, peeking into objects is not.

Each rule is also run on a small tree that breaks it, so a check that finds nothing
is known to look. Reads files only: well under a second.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The project's Python packages (what is installed or shipped to Airflow and Spark).
PACKAGES = ("replicator", "plugins", "dags", "spark", "expectations")
NATIVE_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".pyx", ".pxd")
#: ctypes names that read or write memory at an address, or reach CPython's internals.
CTYPES_PEEKS = frozenset(
    {"cast", "from_address", "from_buffer", "string_at", "wstring_at", "memmove", "memset",
     "addressof", "pythonapi", "pointer", "POINTER", "py_object"}
)  # fmt: skip
RUST_LAYOUT_COPIES = (
    (re.compile(r"#\[repr\(\s*C\b"), "a #[repr(C)] type (a hand-declared C layout)"),
    (re.compile(r'extern\s+"C"\s*\{'), 'an extern "C" block (hand-declared foreign symbols)'),
    (
        re.compile(r"\bob_refcnt\b|\bob_type\b|\bob_base\b|PyObject_HEAD"),
        "CPython object internals",
    ),
    (re.compile(r"confluent_kafka|\bcimpl\b", re.IGNORECASE), "confluent-kafka's internals"),
)


def native_sources(root: Path) -> list[str]:
    """C, C++ and Cython files under the project's Python packages."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in NATIVE_SUFFIXES and path.is_file():
                found.append(str(path.relative_to(root)))
    return found


def c_extensions_in_setup(setup_py: Path) -> list[str]:
    """`Extension(...)` calls and `ext_modules=` arguments in setup.py, by line."""
    found = []
    for node in ast.walk(ast.parse(setup_py.read_text(), str(setup_py))):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name == "Extension":
                found.append(f"line {node.lineno}: Extension(...)")
            found += [
                f"line {node.lineno}: ext_modules=" for k in node.keywords if k.arg == "ext_modules"
            ]
    return found


def rust_layout_copies(src: Path) -> list[str]:
    """Lines of the crate's sources that copy a foreign layout or symbol by hand."""
    found = []
    for path in sorted(src.rglob("*.rs")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            for pattern, what in RUST_LAYOUT_COPIES:
                if pattern.search(code):
                    found.append(f"{path.name}:{number}: {what}: {line.strip()}")
    return found


def _root_name(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (`ctypes` in `ctypes.c_void_p.from_address`)."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def ctypes_peeks(root: Path) -> list[str]:
    """Uses of ctypes' memory-reading names in the project's Python packages: imported
    from ctypes, or reached through ctypes or anything imported from it."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root)
            tree = ast.parse(path.read_text(), str(path))
            from_ctypes = set()  # names bound to ctypes or to something of it
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    from_ctypes |= {
                        (a.asname or a.name).split(".")[0]
                        for a in node.names
                        if a.name.split(".")[0] == "ctypes"
                    }
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ctypes"):
                    from_ctypes |= {a.asname or a.name for a in node.names}
                    found += [
                        f"{where}:{node.lineno}: from ctypes import {a.name}"
                        for a in node.names
                        if a.name in CTYPES_PEEKS or a.name == "*"
                    ]
            found += [
                f"{where}:{node.lineno}: ctypes .{node.attr}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute)
                and node.attr in CTYPES_PEEKS
                and _root_name(node.value) in from_ctypes
            ]
    return found


def test_no_c_sources_in_the_python_packages() -> None:
    assert native_sources(ROOT) == [], (
        "C/C++/Cython sources in the Python packages: the package must not read another "
        "extension's structures; move records with the data plane (dataplane/, Rust, "
        "librdkafka's public API) or with confluent-kafka's public Python API"
    )


def test_setup_builds_no_c_extension() -> None:
    assert c_extensions_in_setup(ROOT / "setup.py") == [], (
        "setup.py builds a C extension: the one compiled module is the Rust data plane "
        "(setuptools-rust); see docs/dataplane.md"
    )


def test_the_data_plane_copies_no_foreign_layout() -> None:
    assert rust_layout_copies(ROOT / "dataplane" / "src") == [], (
        "dataplane/src declares a foreign layout or symbol by hand: use rdkafka-sys's "
        "bindings (generated from rdkafka.h) and PyO3's API instead"
    )


def test_python_code_reads_no_memory_through_ctypes() -> None:
    assert ctypes_peeks(ROOT) == [], (
        "ctypes reads memory by address: use the library's public Python API instead"
    )


def test_each_rule_finds_what_breaks_it(tmp_path: Path) -> None:
    (tmp_path / "replicator" / "engine").mkdir(parents=True)
    (tmp_path / "replicator" / "engine" / "spans.c").write_text("typedef struct {} Message;\n")
    (tmp_path / "replicator" / "engine" / "peek.py").write_text(
        "import ctypes as c\nfrom ctypes import string_at\nimport ctypes.util\n"
        "c.CDLL(ctypes.util.find_library('c')).prctl(1, 9)\n"  # a public function: allowed
        "rk = c.c_void_p.from_address(id(producer) + 16)\n"
    )
    setup_py = tmp_path / "setup.py"
    setup_py.write_text(
        "from setuptools import Extension, setup\n"
        "setup(ext_modules=[Extension('replicator.engine._spans', ['spans.c'])])\n"
    )
    src = tmp_path / "src"
    src.mkdir()
    (src / "lib.rs").write_text(
        "// #[repr(C)] in a comment is no declaration\n"
        "#[repr(C)]\nstruct Handle { ob_base: ffi::PyObject, rk: *mut c_void }\n"
        'extern "C" { fn Message_new0(); }\n'
        'unsafe extern "C" fn log_cb() {}\n'  # a callback it defines: allowed
    )

    assert native_sources(tmp_path) == ["replicator/engine/spans.c"]
    assert c_extensions_in_setup(setup_py) == ["line 2: ext_modules=", "line 2: Extension(...)"]
    copies = rust_layout_copies(src)
    assert [c.split(": ")[0] for c in copies] == ["lib.rs:2", "lib.rs:3", "lib.rs:4"]
    assert "CPython object internals" in copies[1]
    peeks = ctypes_peeks(tmp_path)
    assert peeks == [
        "replicator/engine/peek.py:2: from ctypes import string_at",
        "replicator/engine/peek.py:5: ctypes .from_address",
    ]
