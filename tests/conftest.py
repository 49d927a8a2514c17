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
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A machine that sets PYTHONDONTWRITEBYTECODE (this development machine does) makes each of the
# suite's ~330 CLI processes, and each xdist worker, compile this checkout's sources again (about
# 0.1 s of CPU per process, ~50 CPU-s a run); nothing tested depends on it, so the test session's
# children may cache their bytecode.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

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


# -- a cold numba cache: every learner compiled once, in parallel, before the xdist workers start --
#
# numba caches compiled kernels on disk (streamlearn/*/__pycache__), shared by every process. On a
# cold clone (CI) each learner's first test compiled it, often in both workers at once, and the
# compiles came in the middle of tests (about 180 s of CPU in all). When the whole default suite
# runs under xdist with some learner's kernels not cached, the controller runs ``streamlearn warmup``
# first, the learners split over as many processes as there are workers, balanced by their compile
# cost (CPU seconds measured cold with ``streamlearn warmup --algo A``). STREAMLEARN_TEST_NO_WARMUP=1
# turns it off.
WARMUP_COST = {"fd-son": 64, "s-ada": 32, "bear": 26, "ftsl-shampoo": 25, "compadagrad": 24, "oja-son": 21,
               "adagrad": 13, "mission": 8}  # wall s of `warmup --algo A`, cold, quiet machine (2026-11-27)


def _cold_learners() -> list:
    """The learners whose declared kernels (``compiled_kernels``) are not in numba's cache, one
    per set of kernels (rfd-son runs fd-son's)."""
    from streamlearn.algos import LEARNERS
    from streamlearn.kernels import is_cached

    out, seen = [], set()
    for name, cls in LEARNERS.items():
        key = tuple((m.__name__, k) for m, k in cls.compiled_kernels)
        if key in seen:
            continue
        seen.add(key)
        if not all(is_cached(getattr(m, k)) for m, k in cls.compiled_kernels):
            out.append(name)
    return out


def _cold_numba_readers() -> bool:
    """Whether the numba readers (used without the C library, and by the tests that compare the
    two: about 32 s with adagrad's numba kernels) are not in numba's cache."""
    from streamlearn.io import _parquet_kernels, _text_kernels
    from streamlearn.kernels import is_cached

    return not (is_cached(_text_kernels.parse_chunk) and is_cached(_parquet_kernels.assemble_rows))


def pytest_sessionstart(session):
    config = session.config
    n = getattr(config.option, "numprocesses", None)
    if (hasattr(config, "workerinput") or os.environ.get("STREAMLEARN_TEST_NO_WARMUP") or not n
            or getattr(config, "args_source", None) != pytest.Config.ArgsSource.TESTPATHS):
        return  # an xdist worker, no xdist, or a chosen set of tests: each compiles what it uses
    n = int(n) if str(n).isdigit() else (os.cpu_count() or 1)
    # jobs: (cost, what, command, environment); the numba readers: adagrad's warm-up without C
    jobs = [(WARMUP_COST.get(a, 10), a, ["--algo", a], {}) for a in _cold_learners()]
    if _cold_numba_readers():  # adagrad's warm-up without C compiles adagrad's numba kernels too
        jobs = [j for j in jobs if j[1] != "adagrad"]
        jobs.append((32, "numba readers", ["--algo", "adagrad"], {"STREAMLEARN_NO_C": "1"}))
    if not jobs or n < 2:
        return
    bins = [[] for _ in range(min(n, len(jobs)))]
    load = [0.0] * len(bins)
    for job in sorted(jobs, key=lambda j: -j[0]):
        k = load.index(min(load))
        bins[k].append(job)
        load[k] += job[0]
    t0 = time.perf_counter()
    # one process per bin, running its jobs one after the other
    procs = [subprocess.Popen(" && ".join(" ".join([*(f"{k}={v}" for k, v in env.items()), *map(shlex.quote, CLI_CMD),
                                                    "warmup", *args]) for _, _, args, env in b),
                              shell=True, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for b in bins]
    for p in procs:
        try:
            _, err = p.communicate(timeout=1200)
        except subprocess.TimeoutExpired:
            p.kill()
            err = "timed out"
        if p.returncode:  # the tests of that learner will say what is wrong; say it here too
            sys.stderr.write(f"numba warm-up failed: {err[-2000:]}\n")
    sys.stderr.write(f"numba warm-up of {', '.join(j[1] for j in jobs)} in {len(bins)} processes: "
                     f"{time.perf_counter() - t0:.0f} s\n")


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


# -- shared fixtures and paths of the test modules (below the C-library build above) ---------
#
# Paths are plain names (``from conftest import DATA``) because parametrize lists need them at
# collection; everything a test calls is a fixture. Reference implementations (naive_*.py,
# fuzz_oracle.py, stress_gen.py) stay plain modules.
import sys  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from streamlearn.kernels import numba_fast_load  # noqa: E402

numba_fast_load()  # kernels load in the tests' processes as in the CLI's (kernels/_numba_load.py)

DATA = ROOT / "tests" / "data"
SAMPLE = ROOT / "sample_data"
A9A = SAMPLE / "a9a_train_3k.libsvm.gz"
A9A_TEST = SAMPLE / "a9a_test_1k.libsvm.gz"
NEWS = SAMPLE / "news20_binary_300.vw.gz"
NEWS_TEST = SAMPLE / "news20_binary_test_100.vw"
CLI_CMD = [sys.executable, "-m", "streamlearn"]

# the CLI, printing its peak RSS as a last stderr line ``@@RSS_KB n``: the process's own VmHWM.
# Not ru_maxrss (wait4 or RUSAGE_CHILDREN): Linux carries the forking test process's RSS over
# exec into the child's ru_maxrss, so that measured the xdist worker's size (667 MB in CI).
CLI_RSS_CMD = [sys.executable, "-c",
               "import os, runpy, sys\n"
               "sys.argv = ['streamlearn'] + sys.argv[1:]\n"
               "os.environ['STREAMLEARN_SLOW_EXIT'] = '1'  # the finally below must run\n"
               "try:\n"
               "    runpy.run_module('streamlearn', run_name='__main__')\n"
               "finally:\n"
               "    hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
               "    sys.stderr.write('\\n@@RSS_KB %s\\n' % hwm[0])\n"]


def split_rss(stderr: str):
    """``(stderr without the @@RSS_KB line, peak RSS in bytes)`` of a ``CLI_RSS_CMD`` run (None
    if it died before printing it)."""
    lines = stderr.splitlines()
    rss = [int(x.split()[1]) for x in lines if x.startswith("@@RSS_KB")]
    rest = "\n".join(x for x in lines if not x.startswith("@@RSS_KB")).strip()
    return rest + "\n" if rest else "", rss[-1] * 1024 if rss else None


def cli_env(**extra) -> dict:
    """The environment of a CLI subprocess: this checkout first on ``PYTHONPATH`` (so a clone
    that was never installed runs its own code), plus ``extra``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def default_signals():
    """``preexec_fn`` for a CLI under test: a child of a test run launched in the background
    (``pytest &``: SIGINT ignored) or under ``nohup`` (SIGHUP ignored), as CI may be, inherits
    those signals ignored and then rightly keeps ignoring them; give it the default dispositions
    of the signals it answers."""
    import signal
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _run_cli(*args, stdin=None, cwd=None, env=None, text=False, timeout=None):
    return subprocess.run([*CLI_CMD, *map(str, args)], input=stdin, capture_output=True, cwd=cwd,
                          env=cli_env(**(env or {})), text=text, timeout=timeout)


@pytest.fixture(scope="session")
def run_cli():
    """``run_cli(*args, stdin=None, cwd=None, env=None, text=False)``: the CLI in a subprocess
    (``python -m streamlearn``, through ``main`` and its fast ``os._exit``), returning the
    ``CompletedProcess``. For what needs a real process: exit codes, signals, stdout pipes,
    environment variables read at start-up, imports. ``env`` adds to ``os.environ``."""
    return _run_cli


def _cli_ok(r):
    err = r.stderr if isinstance(r.stderr, str) else r.stderr.decode(errors="replace")
    assert r.returncode == 0, err[-3000:]
    return r


@pytest.fixture(scope="session")
def cli_ok():
    """``cli_ok(run_cli(...))``: asserts exit 0 (showing the end of stderr) and returns the run."""
    return _cli_ok


def _invoke_cli(*args, **kw):
    from click.testing import CliRunner

    from streamlearn.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args], **kw)


@pytest.fixture(scope="session")
def invoke_cli():
    """``invoke_cli(*args, **kw)``: the CLI in this process (click's ``CliRunner`` on the command
    group, so no ``os._exit``), returning click's ``Result`` (``exit_code``, ``output``). For
    commands whose output and exit code are what is checked: no process start, no re-import."""
    return _invoke_cli


# -- learner helpers ----------------------------------------------------------------------------

def _cut_batches(batch, sizes):
    out, a = [], 0
    for s in sizes:
        if a >= batch.n:
            break
        out.append(batch.slice(a, min(batch.n, a + s)))
        a += s
    if a < batch.n:
        out.append(batch.slice(a, batch.n))
    return out


@pytest.fixture(scope="session")
def cut_batches():
    """``cut_batches(batch, sizes)``: consecutive slices of ``batch`` of the given sizes (as far
    as the batch goes), then the rest as one slice."""
    return _cut_batches


def _run_learner(learner, batches, finish=True):
    ps, ls = [], []
    for b in batches:
        p, l = learner.learn_batch(b)
        ps.append(p)
        ls.append(l)
    if finish:
        learner.finish()
    return np.concatenate(ps), np.concatenate(ls)


@pytest.fixture(scope="session")
def run_learner():
    """``run_learner(learner, batches, finish=True)``: learn the batches in order (then
    ``finish()``), returning the concatenated progressive predictions and losses."""
    return _run_learner


def _same_state(a, b):
    ma, aa = a.state_dict()
    mb, ab = b.state_dict()
    assert ma == mb
    assert aa.keys() == ab.keys()
    for k in aa:
        assert np.asarray(aa[k]).dtype == np.asarray(ab[k]).dtype, k
        assert np.asarray(aa[k]).tobytes() == np.asarray(ab[k]).tobytes(), k


@pytest.fixture(scope="session")
def same_state():
    """``same_state(a, b)``: two learners' saved states are equal to the bit (meta and every
    array)."""
    return _same_state


# -- sketch learners (BEAR, MISSION) ------------------------------------------------------------

def _collision_free_keys(p, R, W, seed=0, sketch_seed=0):
    """``p`` feature hashes whose buckets are all distinct in every row of an R x W sketch."""
    from streamlearn.algos import _sketch_kernels as sk
    from streamlearn.algos.bear import Bear

    seeds = Bear(sketch_rows=R, sketch_width=W, sketch_seed=sketch_seed).seeds
    rng = np.random.default_rng(seed)
    used = np.zeros((R, W), bool)
    keys = []
    b = np.empty(R, np.int64)
    s = np.empty(R)
    while len(keys) < p:
        key = np.uint32(rng.integers(0, 2**32))
        sk.sketch_positions(key, seeds, W, b, s)
        if not used[np.arange(R), b].any() and key not in keys:
            used[np.arange(R), b] = True
            keys.append(key)
    return np.array(keys, np.uint32)


@pytest.fixture(scope="session")
def collision_free_keys():
    """``collision_free_keys(p, R, W, seed=0, sketch_seed=0)``: ``p`` feature hashes whose
    buckets are all distinct in every row of an R x W sketch (BEAR and MISSION then equal the
    dense references of naive_olbfgs.py)."""
    return _collision_free_keys


@pytest.fixture(scope="session")
def learner_weights():
    """``learner_weights(L, keys)``: a sketch learner's weights of ``keys``, one row a class."""
    return lambda L, keys: np.array([L.query(keys, c) for c in range(L.kc)])


def heap_masks(L):
    """{hash: class mask} from a scan of every class's heap of a BEAR / MISSION learner (what the class
    membership map must equal)."""
    out = {}
    for c in range(L.kc):
        for key in L.hkeys[c, :int(L.hsize[c])].tolist():
            out[key] = out.get(key, 0) | (1 << c)
    return out
