"""Another revision of this repository, extracted into the benchmark cache, so that a benchmark can
run it beside the working tree in the same run (before / after columns on the same machine load).

``baseline_tree(rev)`` extracts ``git archive rev`` once (the C library is this tree's build when
``streamlearn/kernels/_c`` is unchanged since ``rev``, else that tree runs on numba with
``STREAMLEARN_NO_C=1``: the same results); ``baseline_cmd(tree, *args)`` is the
``streamlearn *args`` command of that tree. Its numba kernels compile on first use, in that tree.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from _common import CACHE, ROOT

__all__ = ["baseline_tree", "baseline_cmd"]


def baseline_tree(rev: str) -> Path:
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=10", rev], capture_output=True,
                         text=True, check=True).stdout.strip()
    dst = CACHE / f"tree-{sha}"
    if not (dst / "streamlearn" / "__init__.py").exists():
        dst.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)
        same_c = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", sha, "--", "streamlearn/kernels/_c"]).returncode == 0
        if same_c:
            for so in (ROOT / "streamlearn" / "kernels").glob("_cfast_lib*"):
                shutil.copy(so, dst / "streamlearn" / "kernels")
    return dst


def baseline_cmd(tree: Path, *args) -> list:
    """``streamlearn *args`` run from ``tree`` (its package first on sys.path)."""
    has_c = any((tree / "streamlearn" / "kernels").glob("_cfast_lib*"))
    pre = "" if has_c else "import os; os.environ['STREAMLEARN_NO_C'] = '1'; "
    code = f"{pre}import sys; sys.path.insert(0, {str(tree)!r}); from streamlearn.cli import main; main()"
    return [sys.executable, "-c", code, *map(str, args)]
