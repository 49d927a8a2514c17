"""Test session set-up: make the C fast path (streamlearn/kernels/_c/cfast.c) testable from a
source checkout.

``pip install`` compiles the library beside the installed package; a checkout that was never
built has none. Then the library is compiled here, once per session, with the flags of
``setup.py`` into a temporary directory, and ``STREAMLEARN_C_LIB`` points at it (inherited by
the CLI runs in subprocesses), and the kernel seam of this process is bound to it as the CLI
binds it (:func:`streamlearn.cli.common.configure_kernels`). Without a C compiler the C tests
skip (the numba path is what runs then, as in such an install).
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
C_SOURCE = ROOT / "streamlearn" / "kernels" / "_c" / "cfast.c"


def setup_cflags() -> list:
    """``CFLAGS`` of setup.py (one definition of the compiler flags)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CFLAGS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no CFLAGS")


def build_c_library(out_dir) -> Path | None:
    """Compile the C fast path into ``out_dir`` as setup.py does; None without a compiler."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    if shutil.which(cc[0]) is None:
        return None
    out = Path(out_dir) / ("_cfast_lib" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    subprocess.run(cc + ["-shared", "-fPIC", *setup_cflags(), "-o", str(out), str(C_SOURCE), "-lm"],
                   check=True, capture_output=True)
    return out


def pytest_configure(config):
    from streamlearn.cli.common import configure_kernels
    from streamlearn.kernels import _cfast as cf

    if not os.environ.get("STREAMLEARN_C_LIB") and not _fresh_in_place_library(cf):
        d = tempfile.mkdtemp(prefix="streamlearn-cfast-")
        config._cfast_dir = d
        lib = build_c_library(d)
        if lib is not None:
            os.environ["STREAMLEARN_C_LIB"] = str(lib)
    # bind the kernel seam as the CLI would in this environment (STREAMLEARN_NO_C too)
    configure_kernels()


def _fresh_in_place_library(cf) -> bool:
    """A library built in place (setup.py build_ext --inplace / a developer's build) that is
    not older than the source."""
    here = Path(cf.__file__).resolve().parent
    path = cf.library_path()
    return (path is not None and here == ROOT / "streamlearn" / "kernels"
            and os.path.getmtime(path) >= os.path.getmtime(C_SOURCE))


def pytest_unconfigure(config):
    d = getattr(config, "_cfast_dir", None)
    if d:
        shutil.rmtree(d, ignore_errors=True)
