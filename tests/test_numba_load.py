"""The short load path for cached numba kernels (streamlearn/kernels/_numba_load.py).

Each run is a fresh process (numba's context is per process): the CLI's train on a sample file,
once through numba's own ``load_overload`` and once through ours. Ours must give the same model
to the byte and make no call of the target context's ``refresh`` (which numba's own path makes
before every load); numba's must make at least one (else this test would not tell them apart).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import A9A, NEWS, ROOT

# counts CPUContext.refresh calls around a CLI run; argv: stock|fast, then the CLI's arguments
RUNNER = r"""
import json, sys
from numba.core import cpu
calls = [0]
_stock_refresh = cpu.CPUContext.refresh
def refresh(self):
    calls[0] += 1
    _stock_refresh(self)
cpu.CPUContext.refresh = refresh
from streamlearn.kernels import _numba_load, numba_fast_load
numba_fast_load()
mode = sys.argv[1]
if mode == "stock":
    _numba_load.uninstall()
installed = _numba_load.installed()
from streamlearn.cli import cli
try:
    cli.main(args=sys.argv[2:], prog_name="streamlearn", standalone_mode=False)
finally:
    sys.stdout.write("\n@@" + json.dumps({"refresh": calls[0], "installed": installed}) + "\n")
"""

CASES = {
    "bear": [str(NEWS), "--algo", "bear"],
    "mission-oaa": [str(A9A), "--algo", "mission", "--oaa", "2"],
    "oja-son": [str(A9A), "--algo", "oja-son", "--loss_function", "logistic"],
    "fd-son": [str(A9A), "--algo", "fd-son", "--loss_function", "logistic"],
    "ftfsl": [str(A9A), "--algo", "ftfsl", "--loss_function", "logistic"],
    "ftsl-shampoo": [str(A9A), "--algo", "ftsl-shampoo", "--oaa", "2"],
}


def _run(mode, args, model):
    out = subprocess.run([sys.executable, "-c", RUNNER, mode, "train", *args, "--quiet", "-f", str(model)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.rsplit("@@", 1)[1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_short_load_path_gives_the_same_model_without_a_refresh(case, tmp_path):
    args = CASES[case]
    # numba's own path first: it compiles what the cache lacks, so the second run loads it all
    stock = _run("stock", args, tmp_path / "stock.slm")
    fast = _run("fast", args, tmp_path / "fast.slm")
    assert not stock["installed"] and fast["installed"]
    assert stock["refresh"] >= 1
    assert fast["refresh"] == 0
    assert (tmp_path / "fast.slm").read_bytes() == (tmp_path / "stock.slm").read_bytes()


def test_entries_that_need_more_than_machine_code_take_the_full_refresh():
    from streamlearn.kernels._numba_load import _machine_code_only
    base = (b"lib", "fndesc", None, "sig", False, (), None, [], ("env",))
    assert _machine_code_only(base)  # a nopython function's environment needs no refresh
    assert not _machine_code_only(base[:4] + (True,) + base[5:])  # object mode
    assert not _machine_code_only(base[:5] + (("lifted",),) + base[6:])  # lifted loops
    assert not _machine_code_only(base[:7] + ([print],) + base[8:])  # initialisers to re-run
    assert not _machine_code_only(base[:8])  # a payload of another numba's format
    assert not _machine_code_only(None)


def test_other_numba_versions_keep_numbas_own_path(monkeypatch):
    import numba
    from streamlearn.kernels import _numba_load
    was = _numba_load.installed()
    _numba_load.uninstall()
    try:
        monkeypatch.setattr(numba, "__version__", "0.%d.0" % _numba_load.VERSIONS[1][1])
        assert _numba_load.install() is False and not _numba_load.installed()
        monkeypatch.setattr(numba, "__version__", "0.%d.1" % _numba_load.VERSIONS[0][1])
        assert _numba_load.install() is True and _numba_load.installed()
    finally:
        _numba_load.uninstall()
        if was:
            _numba_load.install()
