"""Numba hygiene over every kernel module (CONVENTIONS.md item 7): cached, nogil kernels,
no fastmath, nothing compiled at run time."""
import ast
import importlib
from pathlib import Path

import pytest
from numba.core.registry import CPUDispatcher

PKG = Path(__file__).resolve().parents[1] / "streamlearn"
KERNEL_FILES = sorted(PKG.rglob("_*kernels.py"))


def _modname(path):
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(rel.parts)


def test_there_are_kernel_modules():
    names = {p.name for p in KERNEL_FILES}
    assert {"_adagrad_kernels.py", "_text_kernels.py", "_hash_kernels.py"} <= names


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_kernels_are_cached_nogil_and_exact(path):
    mod = importlib.import_module(_modname(path))
    found = 0
    for name, obj in vars(mod).items():
        if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
            found += 1
            assert type(obj._cache).__name__ != "NullCache", f"{name}: needs cache=True"
            assert obj.targetoptions.get("nogil") is True, f"{name}: needs nogil=True"
            assert not obj.targetoptions.get("fastmath"), f"{name}: fastmath changes results"
            assert not obj.targetoptions.get("parallel"), f"{name}: parallel kernels cannot be cached"
    assert found > 0


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_no_function_is_compiled_at_run_time(path):
    """@njit only decorates module-level functions; no njit(...) call inside a function body."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in (n for stmt in node.body for n in ast.walk(stmt)):
                if isinstance(inner, ast.Call):
                    f = inner.func
                    name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                    assert name not in ("njit", "jit"), f"{path.name}:{inner.lineno}: njit at run time"


def _inner_helpers():
    """Kernels compiled without a CPython wrapper (``kernels._jit.INNER``): (module, name)."""
    out = []
    for path in KERNEL_FILES:
        mod = importlib.import_module(_modname(path))
        for name, obj in vars(mod).items():
            if (isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__
                    and obj.targetoptions.get("no_cpython_wrapper")):
                out.append((mod.__name__, name))
    return out


def test_helpers_without_a_python_wrapper_are_private_and_never_called_from_python():
    """A helper compiled without its CPython wrapper would crash the process if Python called
    it: each is private (``_name``), and no Python-side module, test or benchmark calls one
    (they call its public ``name``, where there is one)."""
    import re

    inner = _inner_helpers()
    assert len(inner) > 10
    assert [n for _, n in inner if not n.startswith("_")] == []
    names = {n for _, n in inner}
    root = PKG.parent
    kernel_files = set(KERNEL_FILES)
    calls = re.compile(r"\.(" + "|".join(sorted(map(re.escape, names))) + r")\(")
    for path in [*PKG.rglob("*.py"), *(root / "tests").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]:
        if path in kernel_files or path.name == "test_kernel_hygiene.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            m = calls.search(line)
            assert m is None, f"{path.name}:{i}: calls the wrapper-less kernel helper {m.group(1)} from Python"
