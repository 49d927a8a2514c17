"""Progress on the command line (issue 20, parts 5-7): VW's table with VW's cumulative example
weight (golden tables from VW 9.11.9: tests/data/make_progress_vw_golden.sh), ``-P
auto|bar|table|off`` (a real pseudo-terminal for ``auto``), the input position behind the bar,
``--history_file``, ``streamlearn plot``, the grouped ``--help`` and the installed man page."""
import gzip
import json
import os
import re
import subprocess
import sys

import click
import numpy as np
import pytest

from conftest import A9A, CLI_CMD, ROOT, cli_env, default_signals

DATA = ROOT / "tests" / "data"
WEIGHTED = DATA / "progress_weighted.vw"
ROW = re.compile(r"^(\d+\.\d+|n\.a\.|unknown) ")


def _table(text):
    return [ln.split() for ln in text.splitlines() if ROW.match(ln)]


# -- VW's table: the example weight column and where the rows fall ----------------------------------

@pytest.mark.parametrize("args,golden", [([], "P2"), (["-P", "1.5"], "P1.5"), (["-P", "25"], "P25")])
def test_table_rows_and_cumulative_weight_are_vws(invoke_cli, args, golden):
    """On importance-weighted examples (and unlabeled ones, whose weight VW counts too), the rows
    fall where VW's do (cumulative weight 1, then x2.0 / x1.5 / +25) and the weight column is
    VW's cumulative weight; the losses agree to VW's float32 rounding."""
    r = invoke_cli("train", WEIGHTED, "--loss_function", "logistic", "-P", "table", *args)
    assert r.exit_code == 0, r.output
    got = _table(r.output)
    want = [ln.split() for ln in (DATA / f"progress_weighted_{golden}.table").read_text().splitlines()]
    assert len(got) == len(want) >= 8
    for g, w in zip(got, want):
        assert g[2:5] == w[2:5], (g, w)  # counter, cumulative weight, label ("unknown" included)
        for k in (0, 1, 5):  # average loss, since last, prediction
            assert float(g[k]) == pytest.approx(float(w[k]), abs=2e-4, rel=1e-4), (g, w)
    assert any(w[4] == "unknown" for w in want) or golden != "P25"


def test_weight_column_is_cumulative_not_the_examples(invoke_cli, tmp_path):
    src = tmp_path / "w.vw"
    src.write_text("1 2 |a x\n-1 0.5 |a y\n1 3 |a x y\n-1 |a z\n1 4 |a x:2\n")
    rows = _table(invoke_cli("train", src, "-P", "1", "-P", "table").output)
    # VW: the next row is due at the last row's weight + 1 (2 + 1 = 3: example 2, at 2.5, has none)
    assert [r[2] for r in rows] == ["1", "3", "4", "5"]
    assert [float(r[3]) for r in rows] == [2.0, 5.5, 6.5, 10.5]


def test_progressive_val_rows_equal_the_cli_table_with_weights(invoke_cli, tmp_path):
    """``progressive_val`` (weighted VW text lines, cut into batches anywhere) gives the CLI's
    rows: counter, cumulative weight, average loss, since last."""
    import streamlearn

    lines = [ln for ln in WEIGHTED.read_text().splitlines() if not ln.startswith("|")]  # labeled (a Classifier)
    src = tmp_path / "w.vw"
    src.write_text("\n".join(lines) + "\n")
    r = invoke_cli("train", src, "--loss_function", "logistic", "-P", "table")
    table = _table(r.output)
    stream = ((lines[a:a + 29], None) for a in range(0, len(lines), 29))
    rows = list(streamlearn.progressive_val(stream, streamlearn.Classifier()))
    assert len(rows) == len(table) + 1 and rows[-1]["final"]
    for got, want in zip(rows, table):
        assert got["examples"] == int(want[2]) and f"{got['example_weight']:.1f}" == want[3]
        assert f"{got['average_loss']:.6f}" == want[0] and f"{got['since_last']:.6f}" == want[1]
    assert rows[-1]["weighted_examples"] == pytest.approx(float(re.search(
        r"weighted example sum = (\S+)", r.output).group(1)))


# -- -P modes ------------------------------------------------------------------------------------------

def _stderr(run_cli, *args, stdin=None):
    r = run_cli("train", *args, stdin=stdin)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return r.stderr.decode()


def test_default_off_a_terminal_is_the_table(run_cli):
    err = _stderr(run_cli, A9A)
    assert len(_table(err)) == 12 and "%|" not in err and "finished run" in err


def test_off_shows_no_table_but_the_summary(run_cli):
    err = _stderr(run_cli, A9A, "-P", "off")
    assert not _table(err) and "average  since" not in err
    assert "finished run" in err and "algorithm = adagrad" in err


def test_bar_on_a_file_shows_position_rate_loss_and_no_table(run_cli):
    err = _stderr(run_cli, A9A, "-P", "bar", "--loss_function", "logistic")
    assert not _table(err)
    size = os.path.getsize(A9A)
    last = [s for s in err.replace("\r", "\n").splitlines() if "%|" in s][-1]
    assert last.startswith("100%|"), last
    assert f"{size / 1024:.1f}kB/{size / 1024:.1f}kB" in last, last  # the compressed bytes of the gzip file
    assert "3,000 ex" in last and "ex/s" in last and re.search(r"loss 0\.\d{4}", last), last
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d\]", last), last  # elapsed < remaining (the ETA)
    assert err.index("finished run") > err.index(last)  # the summary after the bar


def test_bar_on_a_pipe_counts_examples_without_eta(run_cli):
    err = _stderr(run_cli, "-P", "bar", stdin=A9A.read_bytes())
    last = [s for s in err.replace("\r", "\n").splitlines() if "examples [" in s][-1]
    assert "%|" not in err and "<" not in last and last.startswith("3.00k examples"), last


def test_quiet_silences_the_bar(run_cli):
    r = run_cli("train", A9A, "-P", "bar", "--quiet")
    assert r.returncode == 0 and r.stderr == b""


def test_bad_mode_is_a_usage_error(invoke_cli):
    r = invoke_cli("train", A9A, "-P", "bars")
    assert r.exit_code == 2 and "auto, bar, table or off" in r.output


def test_bar_falls_back_to_the_table_without_tqdm(invoke_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    r = invoke_cli("train", A9A, "-P", "bar")
    assert r.exit_code == 0 and "needs tqdm" in r.output and len(_table(r.output)) == 12


def _in_pty(args, stdin_data=None):
    """Run the CLI with stderr (and stdout) on a pseudo-terminal, as a user's shell does; returns
    what the terminal showed."""
    import pty
    import select

    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    p = subprocess.Popen([*CLI_CMD, *map(str, args)], stdin=subprocess.PIPE if stdin_data else subprocess.DEVNULL,
                         stdout=slave, stderr=slave, env=cli_env(), preexec_fn=default_signals)
    os.close(slave)
    if stdin_data:
        p.stdin.write(stdin_data)
        p.stdin.close()
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            p.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        out += data
    p.wait(timeout=60)
    os.close(master)
    assert p.returncode == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


def test_auto_on_a_terminal_shows_the_bar_and_its_eta():
    screen = _in_pty(["train", A9A, "--loss_function", "logistic"])
    assert "%|" in screen and not _table(screen.replace("\r\n", "\n"))
    assert re.search(r"100%\|[^\r\n]*\[\d\d:\d\d<\d\d:\d\d\]", screen), screen[-1500:]


def test_auto_on_a_terminal_with_a_piped_input_shows_the_table():
    screen = _in_pty(["train", "--loss_function", "logistic"], stdin_data=A9A.read_bytes())
    assert "%|" not in screen and len(_table(screen.replace("\r\n", "\n"))) == 12


# -- the input position behind the bar ------------------------------------------------------------------

class _Recorder:
    """A monitor (streamlearn.api.train) that records what it is given."""

    def __init__(self):
        self.total = self.unit = None
        self.positions, self.examples = [], []
        self.closed = None

    def start(self, total, unit):
        self.total, self.unit = total, unit
        return True

    def update(self, ev, position):
        self.positions.append(position)
        self.examples.append(ev.examples)

    def close(self, failed):
        self.closed = failed


def _monitored(paths, passes=1, **kw):
    from streamlearn.api import RunConfig, train

    mon = _Recorder()
    lines = []
    train(RunConfig(data=[str(p) for p in paths], passes=passes, chunk_bytes=1 << 14, **kw),
          log=lines.append, monitor=mon)
    return mon, lines


def test_positions_of_plain_and_gzip_files_reach_their_sizes(tmp_path):
    plain = tmp_path / "a9a.libsvm"
    plain.write_bytes(gzip.decompress(A9A.read_bytes()))
    mon, lines = _monitored([plain, A9A], passes=2)
    one = os.path.getsize(plain) + os.path.getsize(A9A)
    assert mon.unit == "bytes" and mon.total == 2 * one
    assert all(p is not None for p in mon.positions)
    assert mon.positions == sorted(mon.positions) and mon.positions[-1] == mon.total
    # the plain file's position is exact: its bytes after its last batch, the second pass after
    k = mon.examples.index(3000)
    assert mon.positions[k] <= os.path.getsize(plain) + 1 and mon.closed is False
    assert not [ln for ln in lines if ROW.match(ln)]  # the monitor shows progress: no table


def test_parquet_positions_are_rows(tmp_path, invoke_cli):
    pq = tmp_path / "a.parquet"
    assert invoke_cli("convert", A9A, "-o", pq, "--row_group_size", "500").exit_code == 0
    mon, _ = _monitored([pq])
    assert mon.unit == "rows" and mon.total == 3000 and mon.positions[-1] == 3000
    mon, _ = _monitored([pq, A9A])  # mixed: Parquet rows as a share of the file's bytes
    assert mon.unit == "bytes" and mon.total == os.path.getsize(pq) + os.path.getsize(A9A)
    assert mon.positions[-1] == mon.total


def test_stdin_size_is_known_only_for_a_regular_file():
    from streamlearn.io.position import input_extent

    with open(A9A, "rb") as f:
        code = ("from streamlearn.io.position import input_extent; print(input_extent('-'))")
        out = subprocess.run([sys.executable, "-c", code], stdin=f, capture_output=True, text=True,
                             env=cli_env()).stdout.strip()
    assert out == f"('bytes', {os.path.getsize(A9A)}, {os.path.getsize(A9A)})"
    out = subprocess.run([sys.executable, "-c", code], input=b"1 |a x\n", capture_output=True,
                         env=cli_env()).stdout.decode().strip()
    assert out == "None"
    assert input_extent(str(A9A))[0] == "bytes"


def test_bar_redraws_at_most_ten_times_a_second(monkeypatch):
    """Between redraws an update only reads the clock: 1,000 updates within 0.25 s draw 3 times."""
    from streamlearn.cli import progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    mon = progress.BarMonitor(stream=open(os.devnull, "w"))
    assert mon.start(1000, "bytes")
    draws = []
    monkeypatch.setattr(mon, "_draw", lambda: draws.append(clock[0]))

    class Ev:
        examples, weighted_labeled, loss_sum = 0, 0.0, 0.0

    for i in range(1000):
        clock[0] = 100.0 + i * 0.00025
        mon.update(Ev, i)
    assert len(draws) == 3 and all(b - a >= 0.1 for a, b in zip(draws, draws[1:]))
    mon.close()


# -- --history_file ------------------------------------------------------------------------------------

def _history(path):
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    return lines[0], lines[1:]


def test_history_rows_are_the_table_rows_and_the_summary(invoke_cli, tmp_path):
    h, m, p = tmp_path / "h.jsonl", tmp_path / "m.json", tmp_path / "p.txt"
    r = invoke_cli("train", WEIGHTED, "--loss_function", "logistic", "-q", "ff", "-l", "0.3", "-P", "table",
                   "--history_file", h, "--metrics", m, "-p", p)
    assert r.exit_code == 0, r.output
    header, rows = _history(h)
    assert header["streamlearn_history"] == 1 and header["algo"] == "adagrad"
    assert header["options"] == {"loss_function": "logistic", "learning_rate": 0.3, "quadratic": ["ff"]}
    assert header["label"] == "adagrad loss_function=logistic learning_rate=0.3 quadratic=ff"
    table = _table(r.output)
    assert len(rows) == len(table) + 1
    for row, t in zip(rows, table):
        assert row["examples"] == int(t[2]) and f"{row['weighted_examples']:.1f}" == t[3]
        assert f"{row['average_loss']:.6f}" == t[0] and f"{row['since_last']:.6f}" == t[1]
        assert row["seconds"] >= 0 and "final" not in row
    # the error column: the weighted error rate of the predictions so far (from -p and the labels)
    ys, ws = [], []
    for ln in WEIGHTED.read_text().splitlines():
        head = ln.split("|")[0].split()
        ys.append(float(head[0]) if head else np.nan)
        ws.append(float(head[1]) if len(head) > 1 else 1.0)
    ys, ws = np.array(ys), np.array(ws)
    preds = np.array([float(x) for x in p.read_text().split()])
    wrong = np.where(np.isnan(ys), 0.0, ((preds > 0) != (ys > 0)) * ws)
    lab_w = np.where(np.isnan(ys), 0.0, ws)
    for row in rows[:-1]:
        k = row["examples"]
        assert row["error"] == pytest.approx(wrong[:k].sum() / lab_w[:k].sum())
    final, summary = rows[-1], json.loads(m.read_text())
    assert final["final"] is True and final["examples"] == summary["examples"] == 400
    assert final["average_loss"] == summary["average_loss"] and final["error"] == summary["error_rate"]
    assert final["weighted_examples"] == summary["weighted_examples"]


def test_history_is_written_with_the_bar_off_or_quiet_at_its_own_rows(invoke_cli, tmp_path):
    h = tmp_path / "h.jsonl"
    r = invoke_cli("train", A9A, "--quiet", "-P", "1000", "-P", "off", "--history_file", h)
    assert r.exit_code == 0 and r.output == ""
    _, rows = _history(h)
    assert [x["examples"] for x in rows] == [1000, 2000, 3000, 3000] and rows[-1]["final"]


def test_history_of_predict_and_squared_loss_error(invoke_cli, tmp_path):
    model, h = tmp_path / "m.slm", tmp_path / "h.jsonl"
    assert invoke_cli("train", A9A, "-f", model, "--quiet").exit_code == 0
    r = invoke_cli("predict", "-i", model, A9A, "-p", tmp_path / "p.txt", "--history_file", h, "-P", "off")
    assert r.exit_code == 0, r.output
    header, rows = _history(h)
    assert header["test_only"] is True and header["options"] == {"initial_model": str(model)}
    assert all(0 <= x["error"] <= 1 for x in rows) and rows[-1]["final"]


def test_history_is_atomic_a_failed_run_leaves_the_old_file(invoke_cli, tmp_path):
    h = tmp_path / "h.jsonl"
    h.write_text("old\n")
    bad = tmp_path / "bad.vw"
    bad.write_text("1 |a x\n" * 50 + "1 |a x:zz\n")
    r = invoke_cli("train", bad, "--strict", "--history_file", h)
    assert r.exit_code == 1 and h.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".h.jsonl")] == []


def test_history_that_is_an_input_is_a_usage_error(invoke_cli, tmp_path):
    r = invoke_cli("train", A9A, "--history_file", A9A)
    assert r.exit_code == 2 and "--history_file" in r.output


# -- streamlearn plot ----------------------------------------------------------------------------------

def _two_runs(invoke_cli, tmp_path):
    out = []
    for algo in ("adagrad", "mission"):
        h = tmp_path / f"{algo}.jsonl"
        r = invoke_cli("train", A9A, "--algo", algo, "--loss_function", "logistic", "--quiet", "--history_file", h)
        assert r.exit_code == 0, r.output
        out.append(h)
    return out


def test_plot_draws_one_labelled_line_per_run(invoke_cli, tmp_path):
    pytest.importorskip("matplotlib")
    runs = _two_runs(invoke_cli, tmp_path)
    svg, png = tmp_path / "c.svg", tmp_path / "c.png"
    assert invoke_cli("plot", *runs, "-o", svg).exit_code == 0
    text = svg.read_text()
    assert "adagrad loss_function=logistic" in text and "mission loss_function=logistic" in text
    assert "examples seen (log scale)" in text and "progressive average loss" in text
    r = invoke_cli("plot", *runs, "-o", png, "--metric", "error", "--label", "A", "--label", "M")
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from streamlearn.plot import plot_histories
    assert plot_histories([str(r) for r in runs], str(tmp_path / "d.svg"), metric="since_last") == 2
    d = (tmp_path / "d.svg").read_text()
    assert "loss since the previous row" in d


def test_plot_without_matplotlib_names_the_extra(run_cli, tmp_path):
    h = tmp_path / "h.jsonl"
    cli_ok = run_cli("train", A9A, "--quiet", "--history_file", h)
    assert cli_ok.returncode == 0
    code = ("import sys; sys.modules['matplotlib'] = None; from streamlearn.cli import main; "
            "main(['plot', sys.argv[1], '-o', sys.argv[2]])")
    r = subprocess.run([sys.executable, "-c", code, str(h), str(tmp_path / "c.png")], capture_output=True,
                       text=True, env=cli_env())
    assert r.returncode == 1 and "pip install 'streamlearn[plot]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "c.png").exists()


def test_plot_of_a_file_that_is_not_a_history_names_it(invoke_cli, tmp_path):
    pytest.importorskip("matplotlib")
    bad = tmp_path / "m.json"
    bad.write_text('{"examples": 3}\n')
    r = invoke_cli("plot", bad, "-o", tmp_path / "c.png")
    assert r.exit_code == 1 and f"{bad}:1: no streamlearn --history_file header" in r.output
    bad.write_text('{"streamlearn_history": 1}\nnot json\n')
    r = invoke_cli("plot", bad, "-o", tmp_path / "c.png")
    assert r.exit_code == 1 and f"{bad}:2: not a JSON line" in r.output


# -- grouped --help ------------------------------------------------------------------------------------

def _sections(text):
    out, cur = {}, None
    for ln in text.splitlines():
        if ln and not ln.startswith(" ") and ln.endswith(":") and not ln.startswith("Usage"):
            cur = ln[:-1]
            out[cur] = []
        elif cur and ln.startswith("  -"):
            out[cur].append(ln.split()[0].rstrip(","))
    return out


def test_train_help_is_grouped_and_lists_every_option_once(invoke_cli):
    from streamlearn.cli import cli
    from streamlearn.cli.options import _users

    r = invoke_cli("train", "--help")
    sec = _sections(r.output)
    for title in ("Input options", "Progress and reports options", "Learner (every --algo) options",
                  "Features and interactions options", "Output options", "Model and passes options",
                  "Inspection options", "Accepted from VW, no effect", "Other options"):
        assert title in sec, list(sec)
    listed = [o for opts in sec.values() for o in opts]
    params = [p for p in cli.commands["train"].params if isinstance(p, click.Option)]
    assert sorted(listed) == sorted([p.opts[0] for p in params] + ["-h"])
    where = {o: t for t, opts in sec.items() for o in opts}
    assert where["-q"] == where["--cubic"] == where["--noconstant"] == "Features and interactions options"
    assert where["-P"] == where["--history_file"] == "Progress and reports options"
    assert where["-d"] == where["--max_line_bytes"] == "Input options"
    assert where["--algo"] == where["-b"] == "Learner (every --algo) options"
    for p in params:  # a learner's own option sits in the section naming exactly its learners
        users = _users(p.name) if p.opts[0].startswith("--") or p.name == "learning_rate" else None
        if users and len(users) < len(_algos()):
            assert where[p.opts[0]] == "Learner: " + ", ".join(users), p.name
        elif users:  # declared by every learner: the common section
            assert where[p.opts[0]] == "Learner (every --algo) options", p.name


def _algos():
    from streamlearn.cli.options import algo_names
    return algo_names()


def test_grouping_follows_where_an_option_is_declared():
    """An option added by a helper lands in the helper's section, one given by grouped() in its
    own, an inline one in the command's: no list of names to keep in step."""
    from click.testing import CliRunner

    from streamlearn.cli.options import VWCommand, _apply, grouped

    def extra_options(f):
        return _apply([click.option("--workers", type=int), grouped("Special", click.option("--odd"))], f, "Engine")

    @click.command(cls=VWCommand, own_group="Mine")
    @extra_options
    @click.option("--inline")
    def cmd(**kw):
        pass

    sec = _sections(CliRunner().invoke(cmd, ["--help"]).output)
    assert sec == {"Engine options": ["--workers"], "Special options": ["--odd"], "Mine options": ["--inline"],
                   "Other options": ["--help"]}


def test_predict_help_is_grouped(invoke_cli):
    sec = _sections(invoke_cli("predict", "--help").output)
    assert sec["Model options"] == ["-i"] and "--history_file" in sec["Progress and reports options"]


# -- the man page is installed with the package -------------------------------------------------------

@pytest.mark.slow
def test_wheel_installs_the_man_page(tmp_path):
    """``pip wheel .`` puts the man page under the wheel's data/share/man/man1, which pip installs
    into PREFIX/share/man/man1 (where ``man`` looks beside PREFIX/bin on PATH)."""
    import zipfile

    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = tmp_path.glob("streamlearn-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    man = [n for n in names if n.endswith(".data/data/share/man/man1/streamlearn.1")]
    assert man and zipfile.ZipFile(wheel).read(man[0]) == (ROOT / "man" / "streamlearn.1").read_bytes()
