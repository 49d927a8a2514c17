"""Outputs that never destroy what they point at, and signals that always answer (issue 16,
defects 3, 4, 5, 7, 8 and 9's --metrics Infinity, --passes on a pipe, select under a non-UTF-8
encoding). Every output here is made in tmp_path: FIFOs made with os.mkfifo stand in for
devices, symlinks point into tmp_path; nothing is ever written to a system path."""
import fcntl
import json
import os
import random
import re
import resource
import signal
import stat
import subprocess
import sys
import threading
import time

import pyarrow.parquet as pq
import pytest

from streamlearn.io.model_file import read_model

from conftest import A9A_TEST, CLI_CMD as CMD, NEWS, cli_env, default_signals  # noqa: E402

ENV = cli_env()



def _lines_file(path, n=20000):
    """A VW file whose predictions (with long tags) are well over a pipe's 64 kB buffer."""
    with open(path, "w") as f:
        for i in range(n):
            f.write(f"{1 - 2 * (i % 2)} 'tag{i}_with_some_length |a x{i % 7}:0.5 y{i % 13}\n")
    return path


def _drain(path, nbytes, out):
    """A reader of the FIFO ``path`` that takes ``nbytes`` (all with None) then closes it."""
    def run():
        with open(path, "rb") as f:
            out.append(f.read() if nbytes is None else f.read(nbytes))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _usage_error(r, *needles):
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def _one_error(r, *needles):
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamlearn: error: "), err
    for n in needles:
        assert n in err, err
    assert ".tmp-" not in err and ".probe-" not in err, err  # the user's path, never a temporary
    return lines[0]


# -- defect 3: outputs that destroy what they point at -----------------------------------------

def test_output_to_a_fifo_is_written_in_place_never_replaced(tmp_path, run_cli):
    """-f, --metrics and --select_out into FIFOs (stand-ins for /dev/stdout and devices, one
    reached through a symlink): each is written through the FIFO, which stays a FIFO, and the
    symlink stays a symlink (main renamed a regular file over them)."""
    ref = tmp_path / "ref.slm"
    run = ("train", NEWS, "--algo", "bear", "--top_k", 50, "--sketch_width", 4000, "--quiet")
    assert run_cli(*run, "-f", ref, "--select_out", tmp_path / "ref.tsv").returncode == 0
    fifos = {k: tmp_path / f"{k}.fifo" for k in ("model", "metrics", "select")}
    for p in fifos.values():
        os.mkfifo(p)
    link = tmp_path / "dev-model"
    link.symlink_to(fifos["model"])
    got = {k: [] for k in fifos}
    readers = [_drain(p, None, got[k]) for k, p in fifos.items()]
    r = run_cli(*run, "-f", link, "--metrics", fifos["metrics"], "--select_out", fifos["select"])
    assert r.returncode == 0, r.stderr
    for t in readers:
        t.join(30)
    assert got["model"][0] == ref.read_bytes()
    assert json.loads(got["metrics"][0])["examples"] == 300
    assert got["select"][0] == (tmp_path / "ref.tsv").read_bytes()
    assert link.is_symlink() and os.readlink(link) == str(fifos["model"])
    for p in fifos.values():
        assert stat.S_ISFIFO(os.lstat(p).st_mode)
    assert sorted(os.listdir(tmp_path)) == sorted(["ref.slm", "ref.tsv", "dev-model", *(p.name for p in fifos.values())])


def test_symlinked_outputs_keep_the_link_and_replace_its_target(tmp_path, run_cli, cli_ok):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    for name in ("m.slm", "m.json", "p.txt"):
        (real_dir / name).write_text("old\n")
        (tmp_path / name).symlink_to(real_dir / name)
    cli_ok(run_cli("train", NEWS, "-f", tmp_path / "m.slm", "--metrics", tmp_path / "m.json",
                   "-p", tmp_path / "p.txt", "--quiet"))
    for name in ("m.slm", "m.json", "p.txt"):
        assert (tmp_path / name).is_symlink(), name
    read_model(str(real_dir / "m.slm"))
    assert json.loads((real_dir / "m.json").read_text())["examples"] == 300
    assert len((real_dir / "p.txt").read_text().splitlines()) == 300
    assert sorted(os.listdir(real_dir)) == ["m.json", "m.slm", "p.txt"]  # no temporaries left


def test_dash_is_standard_output_for_the_model_and_convert(tmp_path, run_cli, cli_ok):
    """-f - and convert -o - write to stdout (never a file named '-'); -f - with another
    output on stdout is a usage error."""
    cli_ok(run_cli("train", NEWS, "-f", tmp_path / "ref.slm", "--quiet"))
    r = cli_ok(run_cli("train", NEWS, "-f", "-", "--quiet", cwd=tmp_path))
    assert r.stdout == (tmp_path / "ref.slm").read_bytes()
    r = cli_ok(run_cli("convert", NEWS, "-o", "-", "--quiet", cwd=tmp_path))
    (tmp_path / "c.parquet").write_bytes(r.stdout)
    assert pq.read_table(tmp_path / "c.parquet").num_rows == 300
    for extra in (["-p", "-"], ["--metrics", "-"]):
        _usage_error(run_cli("train", NEWS, "-f", "-", *extra, cwd=tmp_path), "standard output")
    assert not (tmp_path / "-").exists()


def test_an_output_that_is_an_input_is_a_usage_error_before_anything_is_written(tmp_path, run_cli):
    data = tmp_path / "d.vw"
    data.write_bytes(_lines_file(tmp_path / "src.vw", 200).read_bytes())
    before = data.read_bytes()
    (tmp_path / "alias.vw").symlink_to(data)
    model = tmp_path / "m.slm"
    for args in (["-p", data], ["-p", tmp_path / "alias.vw"], ["--metrics", data], ["-r", data],
                 ["-f", data], ["--readable_model", data]):
        _usage_error(run_cli("train", data, "--quiet", *args), "same file")
        assert data.read_bytes() == before
    _usage_error(run_cli("train", data, "-p", tmp_path / "x.txt", "-f", tmp_path / "x.txt"), "same file")
    assert not (tmp_path / "x.txt").exists()
    # -f may be the -i model (read whole first: VW's idiom); -p may not
    assert run_cli("train", data, "-f", model, "--quiet").returncode == 0
    assert run_cli("train", "-i", model, data, "-f", model, "--quiet").returncode == 0
    m = model.read_bytes()
    _usage_error(run_cli("predict", "-i", model, data, "-p", model), "same file")
    assert model.read_bytes() == m


# -- defect 4: a closed reader of the predictions never stops the model -------------------------

@pytest.mark.parametrize("to", ["stdout", "fifo"])
def test_closed_prediction_reader_still_writes_model_and_metrics(tmp_path, to):
    """VW's idiom 'train F -p /dev/stdout -f m --metrics j | head -1': the reader goes away
    after a line; the model and metrics are written and the run exits 0 (main: the second
    BrokenPipeError skipped both, exit 0)."""
    data = _lines_file(tmp_path / "d.vw")
    model, metrics = tmp_path / "m.slm", tmp_path / "m.json"
    if to == "stdout":
        p = subprocess.Popen([*CMD, "train", str(data), "-p", "-", "-f", str(model), "--metrics", str(metrics),
                              "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        first = p.stdout.readline()
        p.stdout.close()
    else:
        fifo = tmp_path / "p.fifo"
        os.mkfifo(fifo)
        got = []
        reader = _drain(fifo, 100, got)
        p = subprocess.Popen([*CMD, "train", str(data), "-p", str(fifo), "-f", str(model), "--metrics",
                              str(metrics), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
        reader.join(60)
        first = got[0].splitlines()[0]
    err = p.stderr.read()
    assert p.wait(120) == 0, err
    assert first.startswith(b"0 tag0_with_some_length"), first
    assert b"Traceback" not in err
    read_model(str(model))
    assert json.loads(metrics.read_text())["examples"] == 20000


# -- defect 5: half-done on failure -------------------------------------------------------------

def test_unwritable_output_fails_before_learning_and_names_the_users_path(tmp_path, run_cli):
    """An output whose directory is missing, or that is a directory, fails before anything is
    learned or replaced: -f keeps the old model, the message names the path given (main: -f was
    replaced first, and a directory --metrics named the internal temporary)."""
    model = tmp_path / "m.slm"
    assert run_cli("train", A9A_TEST, "-f", model, "--quiet").returncode == 0
    old = model.read_bytes()
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    for bad in (tmp_path / "missing" / "m.json", tmp_path / "afile" / "m.json", tmp_path / "adir"):
        for opt in ("--metrics", "--select_out", "-f", "-p", "--readable_model"):
            args = ["-f", model] if opt != "-f" else []
            if opt == "--select_out":
                args += ["--algo", "mission", "--sketch_width", "1000"]
            r = run_cli("train", NEWS, *args, opt, bad, "--quiet")
            if bad.name == "adir" and r.returncode == 2:  # click's own check of a directory
                assert "is a directory" in r.stderr.decode()
            else:
                _one_error(r, str(bad))
            assert model.read_bytes() == old, (opt, bad)
    assert sorted(os.listdir(tmp_path)) == ["adir", "afile", "m.slm"]
    assert os.listdir(tmp_path / "adir") == []


def _limit_file_size(nbytes):
    def f():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return f


def test_full_disk_on_predictions_keeps_complete_lines_and_names_the_file(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk: the run fails with one line naming the -p file,
    which ends with a complete line (main: a cut last line and no file name)."""
    data = _lines_file(tmp_path / "d.vw", 40000)
    preds = tmp_path / "p.txt"
    r = subprocess.run([*CMD, "train", str(data), "-p", str(preds), "--quiet"], capture_output=True, env=ENV,
                       preexec_fn=_limit_file_size(300_000))
    _one_error(r, str(preds), "cannot write predictions")
    text = preds.read_text()
    assert 0 < len(text) <= 300_000 and text.endswith("\n")
    for i, ln in enumerate(text.splitlines()):
        pred, tag = ln.split(" ")
        float(pred)
        assert tag == f"tag{i}_with_some_length", (i, ln)


def test_a_failed_run_that_predicted_nothing_leaves_no_predictions_file(tmp_path, run_cli):
    bad = tmp_path / "bad.vw"
    bad.write_text("x y z\n" * 150)
    preds = tmp_path / "p.txt"
    r = run_cli("train", bad, "-p", preds, "--quiet")
    assert r.returncode == 1, r.stderr
    assert not preds.exists()
    preds.write_text("old\n")  # an existing file is left as it was
    assert run_cli("train", bad, "-p", preds, "--quiet").returncode == 1
    assert preds.read_text() == "old\n"
    # a successful run that predicts nothing leaves an empty file, as VW
    empty = tmp_path / "e.vw"
    empty.write_text("")
    assert run_cli("train", empty, "-p", tmp_path / "q.txt", "--quiet").returncode == 0
    assert (tmp_path / "q.txt").read_text() == ""


# -- defect 7: signals --------------------------------------------------------------------------

def _silent_producer():
    """A stdin that stays open and sends nothing (a run waiting for input)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdout=subprocess.PIPE)


def _thread_states(pid):
    """{tid: 'State / SigBlk / SigIgn / SigCgt / wchan'} of a process's threads (diagnostics)."""
    out = {}
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            st = open(f"/proc/{pid}/task/{t}/status").read()
            keep = [ln.split(":", 1)[1].strip() for ln in st.splitlines()
                    if ln.split(":")[0] in ("State", "SigBlk", "SigIgn", "SigCgt")]
            wchan = open(f"/proc/{pid}/task/{t}/wchan").read() if os.path.exists(f"/proc/{pid}/task/{t}/wchan") else ""
            out[int(t)] = " / ".join(keep + [wchan])
    except OSError:
        pass
    return out


def _wait_until_waiting_for_input(pid, timeout=60.0):
    """Until the run is past start-up (its reader thread and the interrupt guard's watcher
    exist: 3+ threads) and half a second more, so a loaded machine's slow start is not
    what the test measures; without /proc, two seconds."""
    if not os.path.isdir(f"/proc/{pid}/task"):
        time.sleep(2.0)
        return
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if len(os.listdir(f"/proc/{pid}/task")) >= 3:
                break
        except OSError:
            break
        time.sleep(0.05)
    time.sleep(0.5)


@pytest.mark.parametrize("sig,code", [(signal.SIGHUP, 129), (signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_before_any_prediction_leaves_no_file(tmp_path, sig, code):
    """SIGHUP is SIGTERM's twin (main: killed by it, leaving a 0-byte -p file)."""
    preds = tmp_path / "p.txt"
    prod = _silent_producer()
    p = subprocess.Popen([*CMD, "train", "-p", str(preds), "-f", str(tmp_path / "m.slm"), "--quiet"],
                         stdin=prod.stdout, stderr=subprocess.PIPE, env=ENV, preexec_fn=default_signals)
    prod.stdout.close()
    _wait_until_waiting_for_input(p.pid)
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        state = _thread_states(p.pid)
        p.kill()
        p.communicate()
        pytest.fail(f"no exit 60 s after {sig!r}; threads: {state}")
    finally:
        prod.kill()
    assert p.returncode == code, err
    assert b"Traceback" not in err and b"interrupted" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads the threads' signal masks from /proc")
def test_only_the_main_thread_can_receive_the_signals(tmp_path):
    """The kernel gives a process-directed signal to any thread that does not block it, and only
    the main thread runs Python handlers: one landing on the reader, parser, watcher or a BLAS
    thread left the run waiting for input forever (the SIGHUP case above timed out under load).
    Every other thread of a waiting run blocks SIGINT, SIGTERM and SIGHUP (streamlearn.signals)."""
    prod = _silent_producer()
    p = subprocess.Popen([*CMD, "train", "-p", str(tmp_path / "p.txt"), "--quiet"],
                         stdin=prod.stdout, stderr=subprocess.PIPE, env=ENV, preexec_fn=default_signals)
    prod.stdout.close()
    want = sum(1 << (int(s) - 1) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    try:
        deadline = time.time() + 60
        while time.time() < deadline:  # until the reader thread and the guard's watcher exist
            tasks = os.listdir(f"/proc/{p.pid}/task")
            if len(tasks) >= 3:
                time.sleep(0.5)
                break
            time.sleep(0.1)
        masks = {}
        for t in os.listdir(f"/proc/{p.pid}/task"):
            status = open(f"/proc/{p.pid}/task/{t}/status").read()
            masks[int(t)] = int(re.search(r"^SigBlk:\s*([0-9a-f]+)", status, re.M).group(1), 16)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        prod.kill()
    assert len(masks) >= 3, masks
    assert masks.pop(p.pid) & want == 0  # the main thread takes them
    assert all(m & want == want for m in masks.values()), masks
    assert p.returncode == 143 and b"interrupted (SIGTERM)" in err


_SLOW_RUN = """
import os, signal, sys, time, threading
import numpy as np
from streamlearn.batch import Batch
from streamlearn.evaluate import InterruptGuard, run_stream
from streamlearn.algos import LEARNERS

class Slow(LEARNERS["adagrad"]):
    # a learner whose kernel takes PER seconds an example (a sleep, as a nogil kernel)
    def learn_batch(self, batch):
        time.sleep(PER * batch.n)
        return super().learn_batch(batch)

PER = float(sys.argv[1])
n = 4000
rng = np.random.default_rng(0)
offsets = np.arange(n + 1, dtype=np.int64)
batch = Batch(offsets=offsets, indices=rng.integers(0, 2**32, n).astype(np.uint32), values=np.ones(n),
              labels=np.where(rng.random(n) > 0.5, 1.0, -1.0), weights=np.ones(n), lines=np.arange(1, n + 1),
              source="x")
learner = Slow(bit_precision=10)
print("ready", flush=True)
t0 = time.time()
try:
    with InterruptGuard() as guard:
        run_stream(learner, iter([batch] * 1000), guard=guard)
except KeyboardInterrupt as e:
    print("interrupted", e.signum, round(time.time() - t0, 1), flush=True)
    sys.exit(128 + e.signum)
"""


def test_a_slow_learner_answers_a_signal_within_a_slice(tmp_path):
    """A learner at 0.05 s an example, batches of 4,000 (200 s each): SIGTERM is honoured after
    the current slice of bounded work, not at the batch's end (main: only kill -9 worked)."""
    p = subprocess.Popen([sys.executable, "-c", _SLOW_RUN, "0.05"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV)
    assert p.stdout.readline().strip() == b"ready"
    time.sleep(3.0)
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("SIGTERM not honoured within 60 s")
    assert p.returncode == 143, err
    assert out.split()[:2] == [b"interrupted", b"15"], out


def test_a_second_signal_aborts_at_once(tmp_path):
    """One example takes 100 s (a kernel Python cannot interrupt): the first SIGINT waits
    for it, the second ends the process at once."""
    p = subprocess.Popen([sys.executable, "-c", _SLOW_RUN, "100"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV, preexec_fn=default_signals)
    assert p.stdout.readline().strip() == b"ready"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert p.poll() is None  # the first one waits for the example to end
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("a second SIGINT did not end the process")
    assert p.returncode == 130, err
    assert b"interrupted again" in err


def test_oja_son_with_a_large_sketch_answers_sigterm_and_saves(tmp_path):
    """The issue's case: --algo oja-son --sketch_size 800, whose first batch (about 1,400
    examples) took longer than anyone waits; SIGTERM now stops it within a slice (or, if it
    lands while the kernels compile, right after) and --save_on_interrupt still saves."""
    data = _lines_file(tmp_path / "d.vw", 3000)
    model = tmp_path / "m.slm"
    p = subprocess.Popen([*CMD, "train", str(data), "--algo", "oja-son", "--sketch_size", "800", "-f", str(model),
                          "--save_on_interrupt"], stderr=subprocess.PIPE, env=ENV)
    time.sleep(8.0)
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("SIGTERM not honoured within 120 s")
    assert p.returncode == 143, err
    assert b"saved the model learned so far" in err
    header, _ = read_model(str(model))
    assert header["algo"] == "oja-son"


def test_sigint_during_start_up_gives_no_traceback(tmp_path):
    """SIGINT at random moments of start-up (imports, option parsing, model set-up): exit 130
    and one line, never a traceback nor click's 'Aborted!'."""
    rng = random.Random(3)
    counted = attempts = 0
    while counted < 6 and attempts < 30:  # a loaded machine starts Python slowly: more attempts
        attempts += 1
        delay = rng.uniform(0.15, 0.8 if attempts <= 12 else 2.0)
        prod = _silent_producer()
        p = subprocess.Popen([*CMD, "train", "-f", str(tmp_path / "m.slm"), "--quiet"], stdin=prod.stdout,
                             stderr=subprocess.PIPE, env=ENV, preexec_fn=default_signals)
        prod.stdout.close()
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        prod.kill()
        if p.returncode == -signal.SIGINT or b"streamlearn" not in err or b"init_import_site" in err:
            # before Python, or in its own start-up (site; an editable install's finder, imported by
            # site, names streamlearn in that fatal error): before any streamlearn code ran
            continue
        counted += 1
        assert p.returncode == 130, (delay, err)
        assert b"Traceback" not in err and b"Aborted" not in err, (delay, err)
        assert err.strip().splitlines()[-1].startswith(b"streamlearn: interrupted"), (delay, err)
    assert counted >= 4, (counted, attempts)


# -- defect 8: the stale-temporary cleanup ------------------------------------------------------

_HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def test_a_live_writers_temporary_is_never_removed(tmp_path, run_cli):
    """A temporary whose PID is not alive here (a writer in another PID namespace or host,
    stood in for by a process holding its lock under a PID that does not exist) survives the
    next writer's cleanup; a dead writer's (no lock) is removed."""
    model = tmp_path / "m.slm"
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    live = tmp_path / f".m.slm.tmp-{pid_max + 7}-abcd1234"
    dead = tmp_path / f".m.slm.tmp-{pid_max + 8}-efgh5678"
    dead.write_bytes(b"half a model")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(live)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"locked"
        assert run_cli("train", A9A_TEST, "-f", model, "--quiet").returncode == 0
        assert live.exists()
        assert not dead.exists()
        read_model(str(model))
    finally:
        holder.kill()
        holder.wait()
    assert run_cli("train", A9A_TEST, "-f", model, "--quiet").returncode == 0
    assert not live.exists()  # its writer died: the next writer removes it


def test_the_writer_holds_the_lock_on_its_temporary(tmp_path):
    from streamlearn.io.model_file import atomic_writer

    with atomic_writer(str(tmp_path / "x.bin")) as f:
        f.write(b"data")
        tmp = [n for n in os.listdir(tmp_path) if n.startswith(".x.bin.tmp-")]
        assert len(tmp) == 1
        fd = os.open(tmp_path / tmp[0], os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert os.listdir(tmp_path) == ["x.bin"]
    assert (tmp_path / "x.bin").read_bytes() == b"data"


# -- defect 9 (the outputs' part) ---------------------------------------------------------------

def test_metrics_are_strict_json_when_the_loss_overflows(tmp_path, run_cli, cli_ok):
    data = tmp_path / "d.vw"
    data.write_text("1e200 |a x\n-1e200 |a y\n1e200 |a x y\n")
    cli_ok(run_cli("train", data, "--metrics", tmp_path / "m.json", "--quiet"))
    text = (tmp_path / "m.json").read_text()

    def no_constants(name):
        raise AssertionError(f"{name} in the metrics JSON")
    m = json.loads(text, parse_constant=no_constants)
    assert m["average_loss"] is None and m["examples"] == 3


def test_passes_on_a_fifo_or_stdin_is_a_usage_error_before_reading(tmp_path, run_cli):
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    # nobody writes to the FIFO: a run that opened it would hang (the timeout would fail the test)
    err = _usage_error(run_cli("train", fifo, "--passes", 2, timeout=60), str(fifo), "FIFO", "read only once")
    assert "--passes 2" in err
    _usage_error(run_cli("train", "--passes", 3, stdin=b"1 | a\n", timeout=60), "standard input")
    # a regular file behind the name is read again
    r = run_cli("train", NEWS, "--passes", 2, "--metrics", "-", "--quiet", timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["examples"] == 600


def _nonascii_model(tmp_path, run_cli, cli_ok):
    data = tmp_path / "d.vw"
    data.write_text("".join(f"{1 - 2 * (i % 2)} |w café{i % 3} 日本{i % 2} plain\n" for i in range(200)),
                    encoding="utf-8")
    model = tmp_path / "b.slm"
    cli_ok(run_cli("train", data, "--algo", "mission", "--sketch_width", 1000, "--top_k", 20, "-f", model,
                   "--quiet"))
    return model


def test_select_under_a_non_utf8_encoding_escapes_names(tmp_path, run_cli, cli_ok):
    """select with an ASCII stdout (main: exit 2, a usage error, and no output): TSV names in
    backslash escapes, JSON in \\u escapes (the same JSON); files stay UTF-8."""
    model = _nonascii_model(tmp_path, run_cli, cli_ok)
    utf8 = cli_ok(run_cli("select", "-i", model, env={"PYTHONIOENCODING": "utf-8"})).stdout.decode("utf-8")
    assert "w^café0" in utf8 and "w^日本1" in utf8
    r = cli_ok(run_cli("select", "-i", model, env={"PYTHONIOENCODING": "ascii"}))
    text = r.stdout.decode("ascii")
    assert "w^caf\\xe90" in text and "w^\\u65e5\\u672c1" in text
    assert len(text.splitlines()) == len(utf8.splitlines())
    r = cli_ok(run_cli("select", "-i", model, "--format", "json", env={"PYTHONIOENCODING": "latin-1"}))
    assert json.loads(r.stdout.decode("latin-1")) == json.loads(
        cli_ok(run_cli("select", "-i", model, "--format", "json")).stdout.decode("utf-8"))
