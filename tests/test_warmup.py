"""``streamlearn warmup`` compiles exactly what runs use: after it, in the same numba cache, no
run of the learner compiles anything (every loss, ``--oaa``, text and Parquet input, ``-f`` /
``-i`` / ``predict`` / ``select``), and ``kernels.is_cached`` says so before and after. Each
learner is checked in a fresh ``NUMBA_CACHE_DIR`` (cold), in subprocesses.

Also: the learners hand their kernels one array type whatever the reader gave
(``kernels.kernel_array``), so that a kernel compiled on text serves Parquet too."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import A9A_TEST, NEWS_TEST, cli_env

#: runs in a subprocess: is_cached of the learner's kernels, then (with "runs") the CLI runs of
#: sys.argv[3:] (JSON lists of arguments) in this process, recording every numba compile
PROBE = r"""
import json, sys
from numba.core import event
from streamlearn.algos import LEARNERS
from streamlearn.cli import cli
from streamlearn.kernels import is_cached

algo, what = sys.argv[1], sys.argv[2]
learner = LEARNERS[algo]()
out = {"cached": [is_cached(getattr(m, n)) for m, n in learner.compiled_kernels],
       "compiles_on_first_use": learner.compiles_on_first_use(), "compiled": []}
if what == "runs":
    class Recorder(event.Listener):
        def on_start(self, ev):
            d = ev.data["dispatcher"]
            out["compiled"].append(f"{d.py_func.__module__}.{d.py_func.__qualname__}{ev.data['args']}")

        def on_end(self, ev):
            pass

    event.register("numba:compile", Recorder())
    for args in sys.argv[3:]:
        try:
            cli(json.loads(args), standalone_mode=False)
        except SystemExit as e:
            assert not e.code, (args, e.code)
print(json.dumps(out))
"""


def _probe(algo, what, runs, env):
    r = subprocess.run([sys.executable, "-c", PROBE, algo, what, *map(json.dumps, runs)], capture_output=True,
                       text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["oja-son", "bear", "mission"])
def test_a_run_after_warmup_compiles_nothing(algo, tmp_path):
    env = cli_env(NUMBA_CACHE_DIR=tmp_path / "numba-cache")
    before = _probe(algo, "cached", [], env)
    assert before["cached"] and not any(before["cached"]) and before["compiles_on_first_use"], before

    warm = subprocess.run([sys.executable, "-m", "streamlearn", "warmup", "--algo", algo], capture_output=True,
                          text=True, env=env, timeout=1800)
    assert warm.returncode == 0, warm.stderr[-3000:]

    # inputs: LIBSVM and VW text, Parquet (read-only label arrays), a 3-class VW file
    pq = tmp_path / "a9a.parquet"
    conv = subprocess.run([sys.executable, "-m", "streamlearn", "convert", str(A9A_TEST), "-o", str(pq)],
                          capture_output=True, text=True, env=env)
    assert conv.returncode == 0, conv.stderr
    oaa = tmp_path / "three.vw"
    oaa.write_text("".join(f"{1 + i % 3} |f a{i % 5} b{i % 7}:0.5 c\n" for i in range(40)))
    m, q = str(tmp_path / "m.slm"), ["--quiet"]
    runs = []
    for loss in ("squared", "logistic", "hinge"):
        runs += [["train", str(A9A_TEST), "--algo", algo, "--loss_function", loss, "-f", m, *q],
                 ["predict", "-i", m, str(NEWS_TEST), "-p", str(tmp_path / "p.txt"), *q],
                 ["train", "-i", m, str(pq), "-f", m, *q]]
    if algo in ("bear", "mission"):
        runs += [["train", str(oaa), "--algo", algo, "--oaa", "3", "-f", m, *q],
                 ["predict", "-i", m, str(oaa), *q],
                 ["select", "-i", m, "--top_k", "3"]]
    after = _probe(algo, "runs", runs, env)
    assert all(after["cached"]) and not after["compiles_on_first_use"], after
    assert after["compiled"] == [], "\n".join(after["compiled"])


@pytest.mark.parametrize("algo", sorted(__import__("streamlearn.algos", fromlist=["LEARNERS"]).LEARNERS))
def test_warmup_of_every_learner_succeeds(algo):
    """``streamlearn warmup`` trains, saves, loads and predicts with every loss and ``--oaa``: a
    model any of those runs writes must load (compadagrad's S0, kept symmetric only up to the
    order of a product's factors, was refused as "not symmetric" by its own loader)."""
    from streamlearn.api import warmup

    assert set(warmup([algo])) == {algo}


@pytest.mark.parametrize("algo", ["oja-son", "bear", "mission"])
def test_learners_give_their_kernels_one_array_type(algo):
    """A batch with read-only / non-contiguous / other-dtype arrays (as Parquet gives) reaches
    the run kernel as the C-contiguous writable arrays of a text batch: one specialisation,
    and the same predictions."""
    from streamlearn.algos import LEARNERS
    from streamlearn.io import ReaderConfig, read_batches

    batch = next(iter(read_batches([str(A9A_TEST)], ReaderConfig(keep_names=algo != "oja-son"))))
    odd = batch.take(np.arange(batch.n))
    for f in ("labels", "weights", "values"):
        a = np.array(getattr(odd, f))
        a.setflags(write=False)
        setattr(odd, f, a)
    odd.offsets = odd.offsets.astype(np.int32)
    one, two = LEARNERS[algo](bit_precision=12), LEARNERS[algo](bit_precision=12)
    p1, _ = one.learn_batch(batch)
    kern = getattr(one.compiled_kernels[0][0], one.compiled_kernels[0][1])
    known = list(kern.signatures)
    p2, _ = two.learn_batch(odd)
    np.testing.assert_array_equal(p1, p2)
    assert kern.signatures == known  # no new specialisation


def test_kernel_array_copies_only_what_a_kernel_cannot_take():
    from streamlearn.kernels import kernel_array

    a = np.arange(6.0)
    assert kernel_array(a, np.float64) is a
    ro = np.arange(6.0)
    ro.setflags(write=False)
    got = kernel_array(ro, np.float64)
    assert got.flags.writeable and got is not ro and np.array_equal(got, ro)
    strided = np.arange(12.0)[::2]
    got = kernel_array(strided, np.float64)
    assert got.flags.c_contiguous and np.array_equal(got, strided)
    got = kernel_array(np.arange(3, dtype=np.int32), np.int64)
    assert got.dtype == np.int64 and got.flags.writeable
