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
