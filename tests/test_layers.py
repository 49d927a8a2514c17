"""Imports go downward (README, Layout): ``cli -> api -> evaluate / report / outputs / select /
convert -> io | algos -> kernels -> batch / memory / errors``. ``io`` and ``algos`` do not know
each other (readers know no learner, learners no file format), and nothing below ``cli``
imports click. Checked on every ``import`` statement of the package, lazy ones included."""
import ast

import pytest

from conftest import ROOT

PKG = ROOT / "streamlearn"
#: top-level part of the package -> its layer (higher may import lower, never the reverse)
LAYER = {"__main__": 7, "cli": 6, "estimator": 6, "distributed": 5.5, "plot": 5, "api": 5,
         "evaluate": 4, "history": 4, "report": 4, "outputs": 4, "select": 4, "convert": 4, "audit": 4,
         "io": 3, "algos": 3,
         "kernels": 2,
         "batch": 1, "memory": 1, "errors": 1, "signals": 1, "__init__": 0}


def _part(rel_parts):
    """'streamlearn/io/source.py' -> 'io'; 'streamlearn/api.py' -> 'api'."""
    first = rel_parts[0]
    return first[:-3] if first.endswith(".py") else first


def _imports(path):
    """Top-level parts of streamlearn that ``path`` imports, and the external roots."""
    rel = path.relative_to(PKG).parts
    pkg = list(rel[:-1])  # the module's package, relative to streamlearn
    ours, theirs = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                target = base + (node.module.split(".") if node.module else [])
                if not target:  # "from .. import x" at the top: x is the part
                    ours.update(a.name for a in node.names)
                else:
                    ours.add(target[0])
            elif node.module.split(".")[0] == "streamlearn":
                parts = node.module.split(".")[1:]
                ours.update([parts[0]] if parts else [a.name for a in node.names])
            else:
                theirs.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "streamlearn" and len(parts) > 1:
                    ours.add(parts[1])
                else:
                    theirs.add(parts[0])
    return ours, theirs


MODULES = sorted(p for p in PKG.rglob("*.py"))


def test_every_part_has_a_layer():
    assert {_part(p.relative_to(PKG).parts) for p in MODULES} <= set(LAYER)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_go_downward(path):
    me = _part(path.relative_to(PKG).parts)
    ours, theirs = _imports(path)
    for other in ours - {me, "__version__"}:
        assert other in LAYER, (me, other)
        assert LAYER[other] < LAYER[me], f"{path.relative_to(ROOT)} ({me}) imports {other}: not downward"
    if me != "cli":
        assert "click" not in theirs, f"{path.relative_to(ROOT)} imports click"
