"""Golden CLI runs on sample_data/ through the real entry point (exit codes, files, stderr)."""
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import A9A, A9A_TEST, NEWS, NEWS_TEST, ROOT, cli_env


def lines(p):
    return Path(p).read_text().splitlines()


def test_train_libsvm_gz_reports_like_vw_and_writes_model_and_metrics(tmp_path, run_cli, cli_ok):
    r = cli_ok(run_cli("train", A9A, "--loss_function", "logistic", "-b", 18, "-f", tmp_path / "a.slm",
              "--metrics", tmp_path / "m.json"))
    err = r.stderr.decode()
    for s in ("average  since", "finished run", "number of examples = 3000", "best constant",
              "total feature number", "average loss"):
        assert s in err
    m = json.loads((tmp_path / "m.json").read_text())
    for k in ("examples", "weighted_examples", "average_loss", "error_rate", "seconds", "examples_per_second",
              "total_features", "model_bytes", "skipped_lines"):
        assert k in m
    assert m["examples"] == 3000 and m["skipped_lines"] == 0
    assert m["model_bytes"] == os.path.getsize(tmp_path / "a.slm")
    assert 0.1 < m["error_rate"] < 0.25  # a9a: ~0.16-0.18 after one pass
    # a9a rows have 13 or 14 features + the constant
    assert 3000 * 14 <= m["total_features"] <= 3000 * 15


def test_predict_needs_no_flags_and_is_reproducible(tmp_path, run_cli, cli_ok):
    cli_ok(run_cli("train", A9A, "--loss_function", "logistic", "-b", 16, "--normalized", "-f", tmp_path / "a.slm", "--quiet"))
    r1 = cli_ok(run_cli("predict", "-i", tmp_path / "a.slm", A9A_TEST, "-p", tmp_path / "p1.txt", "--metrics", tmp_path / "m.json"))
    cli_ok(run_cli("predict", "-i", tmp_path / "a.slm", A9A_TEST, "-p", tmp_path / "p2.txt"))
    p1 = lines(tmp_path / "p1.txt")
    assert len(p1) == 1000 and p1 == lines(tmp_path / "p2.txt")
    assert "only testing" in r1.stderr.decode()
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["examples"] == 1000 and m["error_rate"] < 0.25
    # train -t with the model gives the same predictions as predict
    cli_ok(run_cli("train", "-t", "-i", tmp_path / "a.slm", A9A_TEST, "-p", tmp_path / "p3.txt", "--quiet"))
    assert lines(tmp_path / "p3.txt") == p1
    # predict without -p writes to stdout
    r = cli_ok(run_cli("predict", "-i", tmp_path / "a.slm", A9A_TEST, "--quiet"))
    assert r.stdout.decode().splitlines() == p1


def test_stdin_vw_with_tags(tmp_path, run_cli, cli_ok):
    data = gzip.decompress(NEWS.read_bytes())
    cli_ok(run_cli("train", "-d", "-", "--loss_function", "logistic", "-f", tmp_path / "n.slm", "-p", tmp_path / "p.txt",
          "--quiet", stdin=data))
    out = lines(tmp_path / "p.txt")
    assert len(out) == 300
    first_tag = data.split(b"\n")[0].split(b"|")[0].split(b"'")[1].strip().decode()
    assert out[0].split()[1] == first_tag
    # gzip on stdin is detected by its magic bytes
    cli_ok(run_cli("train", "-", "--loss_function", "logistic", "-p", tmp_path / "q.txt", "--quiet", stdin=NEWS.read_bytes()))
    assert lines(tmp_path / "q.txt") == out


def test_continue_training_equals_one_run(tmp_path, run_cli, cli_ok):
    rows = gzip.decompress(A9A.read_bytes()).splitlines(keepends=True)
    (tmp_path / "a.txt").write_bytes(b"".join(rows[:1500]))
    (tmp_path / "b.txt").write_bytes(b"".join(rows[1500:]))
    args = ["--loss_function", "logistic", "-b", 16, "--normalized", "--quiet"]
    cli_ok(run_cli("train", A9A, *args, "-f", tmp_path / "whole.slm"))
    cli_ok(run_cli("train", tmp_path / "a.txt", *args, "-f", tmp_path / "half.slm"))
    cli_ok(run_cli("train", "-i", tmp_path / "half.slm", tmp_path / "b.txt", "--quiet", "-f", tmp_path / "cont.slm"))
    cli_ok(run_cli("predict", "-i", tmp_path / "whole.slm", A9A_TEST, "-p", tmp_path / "pw.txt", "--quiet"))
    cli_ok(run_cli("predict", "-i", tmp_path / "cont.slm", A9A_TEST, "-p", tmp_path / "pc.txt", "--quiet"))
    assert lines(tmp_path / "pw.txt") == lines(tmp_path / "pc.txt")


def test_passes(tmp_path, run_cli, cli_ok):
    cli_ok(run_cli("train", A9A, "--passes", 2, "--metrics", tmp_path / "m.json", "--quiet"))
    assert json.loads((tmp_path / "m.json").read_text())["examples"] == 6000
    r = run_cli("train", "-", "--passes", 2, stdin=b"1 | a\n")
    assert r.returncode == 2 and b"stdin" in r.stderr.lower() or b"standard input" in r.stderr


def test_malformed_lines_are_reported_skipped_and_counted(tmp_path, run_cli, cli_ok):
    f = tmp_path / "bad.vw"
    f.write_text("1 | a b:2\nxx | a\n-1 | a b:zz\n1 | c\n")
    r = cli_ok(run_cli("train", f, "--metrics", tmp_path / "m.json"))
    err = r.stderr.decode()
    assert f"{f}:2:" in err and f"{f}:3:" in err
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["examples"] == 2 and m["skipped_lines"] == 2
    r = run_cli("train", f, "--strict", "-f", tmp_path / "x.slm")
    assert r.returncode == 1 and f"{f}:2" in r.stderr.decode() and b"Traceback" not in r.stderr
    assert not (tmp_path / "x.slm").exists()


def test_bad_files_exit_1_one_line_no_output_left(tmp_path, run_cli, cli_ok):
    r = run_cli("train", tmp_path / "missing.vw", "-f", tmp_path / "m.slm")
    assert r.returncode == 1 and b"Traceback" not in r.stderr and b"missing.vw" in r.stderr
    assert len(r.stderr.decode().strip().splitlines()) == 1
    # truncated gzip
    t = tmp_path / "trunc.gz"
    t.write_bytes(A9A.read_bytes()[:5000])
    r = run_cli("train", t, "-f", tmp_path / "m.slm", "--quiet")
    assert r.returncode == 1 and b"trunc.gz" in r.stderr and b"Traceback" not in r.stderr
    assert not (tmp_path / "m.slm").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["trunc.gz"]
    # corrupt / foreign model
    cli_ok(run_cli("train", A9A, "-f", tmp_path / "m.slm", "--quiet"))
    raw = bytearray((tmp_path / "m.slm").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / "bad.slm").write_bytes(bytes(raw))
    r = run_cli("predict", "-i", tmp_path / "bad.slm", A9A_TEST, "-p", tmp_path / "p.txt")
    assert r.returncode == 1 and b"corrupt" in r.stderr and b"Traceback" not in r.stderr
    assert not (tmp_path / "p.txt").exists()
    r = run_cli("predict", "-i", A9A, A9A_TEST)
    assert r.returncode == 1 and b"not a streamlearn model" in r.stderr


def test_existing_model_survives_a_failed_run(tmp_path, run_cli, cli_ok):
    cli_ok(run_cli("train", A9A, "-f", tmp_path / "m.slm", "--quiet"))
    before = (tmp_path / "m.slm").read_bytes()
    t = tmp_path / "trunc.gz"
    t.write_bytes(A9A.read_bytes()[:5000])
    r = run_cli("train", t, "-f", tmp_path / "m.slm", "--quiet", "-p", tmp_path / "p.txt")
    assert r.returncode == 1
    assert (tmp_path / "m.slm").read_bytes() == before
    # predictions made before the error are kept, each a complete line
    p = tmp_path / "p.txt"
    assert not p.exists() or p.read_text().endswith("\n")
    # a stream that fails after good lines keeps the predictions already made
    good = gzip.decompress(A9A.read_bytes())
    bad = tmp_path / "late.gz"
    bad.write_bytes(gzip.compress(good * 40)[:-2000])
    r = run_cli("train", bad, "-f", tmp_path / "m.slm", "--quiet", "-p", p)
    assert r.returncode == 1 and b"late.gz" in r.stderr
    kept = p.read_text().splitlines()
    assert len(kept) > 3000 and all(len(x.split()) == 1 for x in kept)
    assert (tmp_path / "m.slm").read_bytes() == before


def test_usage_errors_exit_2(tmp_path, run_cli):
    r = run_cli("train", "--no_such_option", A9A)
    assert r.returncode == 2 and b"Usage" in r.stderr
    r = run_cli("train", "-b", "lots", A9A)
    assert r.returncode == 2
    r = run_cli("train", "--loss_function", "cubic", A9A)
    assert r.returncode == 2


def test_predict_into_closed_pipe_exits_quietly(tmp_path, run_cli, cli_ok):
    cli_ok(run_cli("train", A9A, "-f", tmp_path / "m.slm", "--quiet"))
    big = tmp_path / "big.libsvm"
    big.write_bytes(gzip.decompress(A9A.read_bytes()) * 20)
    cmd = (f"{sys.executable} -m streamlearn predict -i {tmp_path / 'm.slm'} {big} --quiet | head -1")
    env = cli_env()
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == b"" and len(r.stdout.splitlines()) == 1


def test_quiet_and_additive_progress(tmp_path, run_cli, cli_ok):
    r = cli_ok(run_cli("train", A9A, "--quiet"))
    assert r.stderr == b""
    r = cli_ok(run_cli("train", A9A, "-P", 1000))
    rows = [l for l in r.stderr.decode().splitlines() if l[:1].isdigit()]
    assert [int(l.split()[2]) for l in rows] == [1000, 2000, 3000]


def test_quadratic_and_noconstant_change_features(tmp_path, run_cli, cli_ok):
    base = json.loads(cli_ok(run_cli("train", NEWS_TEST, "--quiet", "--metrics", "-")).stdout)
    noc = json.loads(cli_ok(run_cli("train", NEWS_TEST, "--quiet", "--noconstant", "--metrics", "-")).stdout)
    assert base["total_features"] - noc["total_features"] == 100
    q = json.loads(cli_ok(run_cli("train", NEWS_TEST, "--quiet", "-q", "sb", "--metrics", "-")).stdout)
    assert q["total_features"] > 3 * base["total_features"]


def test_bear_select_prints_names_sorted_by_weight(tmp_path, run_cli, cli_ok):
    cli_ok(run_cli("train", NEWS, "--algo", "bear", "--loss_function", "logistic", "--top_k", 3000,
          "-f", tmp_path / "b.slm", "--quiet", "--select_out", tmp_path / "sel.tsv"))
    r = cli_ok(run_cli("select", "-i", tmp_path / "b.slm"))
    rows = [l.split("\t") for l in r.stdout.decode().splitlines()]
    assert rows[0] == ["name", "hash", "weight"]
    body = rows[1:]
    assert len(body) > 100
    w = [abs(float(x[2])) for x in body]
    assert w == sorted(w, reverse=True)
    names = {x[0] for x in body}
    assert "Constant" not in names  # the intercept is kept apart from the heap: never selected
    assert all(n.startswith(("s^", "b^")) for n in names)
    assert (tmp_path / "sel.tsv").read_text() == r.stdout.decode()


def test_fast_exit_loses_no_output_and_keeps_exit_codes(tmp_path, run_cli, cli_ok):
    """The console script leaves with os._exit after a command (no interpreter teardown):
    everything written to a pipe, the predictions file and the model must be complete, and
    the exit codes must be those of a normal exit; STREAMLEARN_SLOW_EXIT=1 gives the same."""
    outs = []
    for slow in ("0", "1"):
        env = {"STREAMLEARN_SLOW_EXIT": slow}
        model, preds = tmp_path / f"m{slow}.slm", tmp_path / f"p{slow}.txt"
        r = cli_ok(run_cli("train", A9A, "-f", model, "-p", "-", "--quiet", env=env))
        cli_ok(run_cli("predict", "-i", model, A9A_TEST, "-p", preds, "--quiet", env=env))
        bad = run_cli("train", tmp_path / "missing.vw", env=env)
        usage = run_cli("train", "--no_such_option", env=env)
        assert len(r.stdout.decode().splitlines()) == 3000  # every prediction reached the pipe
        assert len(lines(preds)) == 1000
        assert bad.returncode == 1 and b"no such file" in bad.stderr
        assert usage.returncode == 2 and b"No such option" in usage.stderr
        outs.append((r.stdout, model.read_bytes(), preds.read_bytes()))
    assert outs[0] == outs[1]


def test_a_failed_run_removes_only_a_regular_empty_predictions_file(tmp_path, run_cli):
    """With no prediction made, -p's empty file is removed, but never a symlink or anything
    else that is not a regular file (-p /dev/stdout in a failed run as root once replaced
    /dev/stdout by a regular file for every later process)."""
    bad = tmp_path / "bad.vw"
    bad.write_text("notalabel |a x\n1 |a y\n")
    target = tmp_path / "target.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    plain = tmp_path / "plain.txt"
    for p in (plain, link):
        r = run_cli("train", bad, "--strict", "-p", p)
        assert r.returncode == 1 and b"bad.vw:1" in r.stderr
    assert not plain.exists()  # the sink was opened, the run failed: the empty file is gone
    assert link.is_symlink() and target.exists()  # a symlink is left alone


def _unit_norm_copy(src, dst):
    """``src`` (VW text, namespaces s and b, ``name:value`` or bare names) with every line's
    values divided by its L2 norm: what ``--unit_norm --noconstant`` should feed the learner
    (test_readers checks that the constant is scaled with the rest)."""
    import math
    out = []
    for line in Path(src).read_text().splitlines():
        head, *nss = line.split("|")
        toks = [[t.rsplit(":", 1) if ":" in t else [t, "1"] for t in ns.split()[1:]] for ns in nss]
        norm = math.sqrt(sum(float(v) ** 2 for ns in toks for _, v in ns)) or 1.0
        out.append(head + "".join("|" + ns.split()[0] + " " + " ".join(f"{n}:{float(v) / norm!r}" for n, v in t)
                                  for ns, t in zip(nss, toks)))
    Path(dst).write_text("\n".join(out) + "\n")


@pytest.mark.parametrize("algo", ["adagrad", "bear"])
def test_unit_norm_equals_training_on_normalised_rows_and_is_kept_in_the_model(tmp_path, algo, run_cli, cli_ok):
    norm = tmp_path / "norm.vw"
    _unit_norm_copy(NEWS_TEST, norm)
    opts = ["--algo", algo, "--loss_function", "logistic", "--quiet", "--noconstant"]
    cli_ok(run_cli("train", NEWS_TEST, *opts, "--unit_norm", "-f", tmp_path / "u.slm", "-p", tmp_path / "u.txt"))
    cli_ok(run_cli("train", norm, *opts, "-f", tmp_path / "n.slm", "-p", tmp_path / "n.txt"))
    # (bear's --example_norm auto is unit already: the raw run says none)
    raw_opts = ["--example_norm", "none"] if algo in ("bear", "mission") else []
    cli_ok(run_cli("train", NEWS_TEST, *opts, *raw_opts, "-p", tmp_path / "raw.txt"))
    u, n, raw = (np.loadtxt(tmp_path / f, usecols=0) for f in ("u.txt", "n.txt", "raw.txt"))
    np.testing.assert_allclose(u, n, rtol=1e-9, atol=1e-12)  # progressive predictions
    assert not np.allclose(u, raw)
    # predict takes --unit_norm from the model: raw input, same scores as the normalised file
    cli_ok(run_cli("predict", "-i", tmp_path / "u.slm", NEWS_TEST, "-p", tmp_path / "pu.txt"))
    cli_ok(run_cli("predict", "-i", tmp_path / "n.slm", norm, "-p", tmp_path / "pn.txt"))
    pu, pn = (np.loadtxt(tmp_path / f, usecols=0) for f in ("pu.txt", "pn.txt"))
    np.testing.assert_allclose(pu, pn, rtol=1e-9, atol=1e-12)
    # continuing a model trained without it cannot switch it on
    r = run_cli("train", NEWS_TEST, "-i", tmp_path / "n.slm", "--unit_norm", "--quiet")
    assert r.returncode == 2 and b"--unit_norm" in r.stderr


def test_oaa_labels_out_of_range_are_skipped_and_named(tmp_path, run_cli, cli_ok):
    src = tmp_path / "mc.vw"
    rows = ["1 |f a b", "2 |f c", "3 |f a", "0 |f b", "2.5 |f c", "|f a", "2 'keep |f b c"]
    src.write_text("\n".join(rows) + "\n")
    r = cli_ok(run_cli("train", src, "--algo", "mission", "--oaa", 2, "-p", tmp_path / "p.txt", "--metrics", tmp_path / "m.json"))
    err = r.stderr.decode()
    for line, lab in ((3, "3"), (4, "0"), (5, "2.5")):
        assert f"{src}:{line}: label {lab} is not a class of --oaa 2 (1..2); line skipped" in err
    assert "loss_function = softmax" in err
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["skipped_lines"] == 3 and m["examples"] == 4 and m["loss_function"] == "softmax"
    assert lines(tmp_path / "p.txt")[-1].endswith(" keep") and len(lines(tmp_path / "p.txt")) == 4
    r = run_cli("train", src, "--algo", "bear", "--oaa", 2, "--strict", "-p", tmp_path / "s.txt")
    assert r.returncode == 1
    assert r.stderr.decode().strip().splitlines()[-1] == f"streamlearn: error: {src}:3: label 3 is not a class of --oaa 2 (1..2)"
    assert len(lines(tmp_path / "s.txt")) == 2  # the good lines before it keep their predictions
    r = run_cli("train", src, "--algo", "mission", "--oaa", 2, "--loss_function", "hinge")
    assert r.returncode == 2 and b"--loss_function does not apply with --oaa" in r.stderr


def test_bad_quadratic_is_a_usage_error_before_any_output(invoke_cli, tmp_path):
    """-q is validated in one place (the reader's configuration), before the predictions file
    is opened: exit 2 with the reader's message, no -p file left behind."""
    preds = tmp_path / "p.txt"
    r = invoke_cli("train", A9A_TEST, "-q", "abc", "-p", preds)
    assert r.exit_code == 2, r.output
    assert "quadratic interaction 'abc': give exactly two namespace letters" in r.output
    assert not preds.exists()


@pytest.mark.parametrize("content,fmt,expect", [
    (b"a,b,c\n1,2,3\n4,5,6\n", [], "3 lines skipped and no labeled example read: they failed to parse as LIBSVM"),
    (None, ["--format", "libsvm"], "lines skipped: they failed to parse as LIBSVM"),
    (bytes(range(256)) * 40, [], "no labeled example read: they failed to parse (line 1: non-numeric label); "
                                 "it looks like binary data, not text"),
    (b"7 |f a\n9 |f b\n", ["--algo", "mission", "--oaa", "2"],
     "no labeled example read: the labels are not ones --algo mission can learn from"),
])
def test_input_that_is_not_what_it_claims_is_an_error(tmp_path, run_cli, content, fmt, expect):
    """A CSV, VW text read as LIBSVM, labels outside --oaa K: exit 1 naming the file, the first
    bad line and the likely cause; no model written, an existing one unchanged, no -p file."""
    src = tmp_path / "in.txt"
    early = content is None
    if early:  # 3000 lines of VW text in 1 KiB chunks: the run stops after the first 100 or so
        content = b"".join(b"1 |f a%d b\n" % i for i in range(3000))
    src.write_bytes(content)
    model = tmp_path / "m.slm"
    model.write_bytes(b"old model")
    r = run_cli("train", src, *fmt, "-f", model, "-p", tmp_path / "p.txt", "--quiet",
                env={"STREAMLEARN_CHUNK_BYTES": "1024", "STREAMLEARN_PARSE_THREADS": "1"})
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert err.startswith(f"streamlearn: error: {src}: ") and expect in err and "(line 1: " in err, err
    if early:
        n = int(re.search(r"the first (\d+) lines skipped", err).group(1))
        assert 100 <= n < 200, err
    assert model.read_bytes() == b"old model" and not (tmp_path / "p.txt").exists()


def test_skipped_line_warnings_are_capped_per_reason(tmp_path, invoke_cli):
    src = tmp_path / "w.vw"
    bad_value = [f"1 |a x:zz{i}" for i in range(40)]  # 40 x "bad feature value"
    bad_label = [f"{i}x |a y" for i in range(30)]  # 30 x "non-numeric label"
    src.write_text("\n".join(["1 |a x"] + bad_value + bad_label + ["-1 |a y"]) + "\n")
    r = invoke_cli("train", src, "--metrics", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    shown = [ln for ln in r.output.splitlines() if ln.startswith("warning: ") and ln.endswith("; line skipped")]
    assert len(shown) == 20  # 10 of each reason
    assert "warning: 50 more skipped lines not shown (the first 10 of each reason are)" in r.output
    assert json.loads((tmp_path / "m.json").read_text())["skipped_lines"] == 70


@pytest.mark.parametrize("value,why", [("abc", "must be a number"), ("0.5", "must be > 1.0"), ("0", "must be > 0")])
def test_bad_progress_value_is_a_usage_error(invoke_cli, value, why):
    r = invoke_cli("train", A9A_TEST, "-P", value)
    assert r.exit_code == 2 and why in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("args,why", [
    (["--algo", "mission", "--sketch_bytes", "-5"], "must be >= 0"),
    (["--algo", "bear", "--sketch_width", "-1"], "must be >= 0"),
    (["--algo", "bear", "--curvature_eps", "-1"], "--curvature_eps must be >= 0"),
])
def test_negative_sizes_and_tolerances_are_usage_errors(invoke_cli, args, why):
    r = invoke_cli("train", A9A_TEST, *args)
    assert r.exit_code == 2 and why in r.output and "Traceback" not in r.output, r.output


def test_a_run_that_will_compile_says_so_once(tmp_path, monkeypatch):
    """Before kernels are compiled (no numba cache), the run prints one line saying so; with
    the kernels cached it prints none; --quiet prints none."""
    from streamlearn import api, kernels
    from streamlearn.algos.mission import Mission

    lines = []
    cfg = dict(data=[str(A9A_TEST)], algo="mission", hyper={"bit_precision": 12})
    api.train(api.RunConfig(**cfg), log=lines.append)  # compiled (or cached) now
    assert Mission(bit_precision=12).compiles_on_first_use() is False
    assert not [ln for ln in lines if ln.startswith("compiling")]
    monkeypatch.setattr(kernels, "is_cached", lambda k: False)  # as in a fresh install
    assert Mission(bit_precision=12).compiles_on_first_use() is True
    lines.clear()
    api.train(api.RunConfig(**cfg), log=lines.append)
    assert [ln for ln in lines if ln.startswith("compiling")] == [
        "compiling the mission kernels: first run only, cached afterwards (streamlearn warmup compiles "
        "them ahead of time)..."]
    lines.clear()
    api.train(api.RunConfig(quiet=True, **cfg), log=lines.append)
    assert lines == []


def test_is_cached_sees_numbas_cache_index(tmp_path):
    """With an empty numba cache a kernel is not cached; once called it is (in that process),
    and a later process finds it in the cache (the toy learner's small kernel, a fresh
    NUMBA_CACHE_DIR)."""
    code = ("import sys, numpy as np; sys.path.insert(0, sys.argv[1])\n"
            "from streamlearn import kernels\n"
            "k = kernels.lazy('toy._toy_kernels'); before = kernels.is_cached(k.toy_run)\n"
            "st = k.ToyState(np.zeros(8), np.zeros(1, np.int64)); hy = k.ToyHyper(7, 1, 0.1)\n"
            "o = np.zeros(1, np.int64); e = np.empty(0)\n"
            "k.toy_run(np.zeros(1, np.int64), np.zeros(0, np.uint32), e, e, e, st, hy, True, e, e)\n"
            "print(before, kernels.is_cached(k.toy_run), kernels.is_cached(len))\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "nbc"), "PYTHONPATH": str(ROOT)}
    tests = str(Path(__file__).resolve().parent)
    first = subprocess.run([sys.executable, "-c", code, tests], capture_output=True, text=True, env=env)
    assert first.stdout.split() == ["False", "True", "True"], first.stderr[-2000:]
    again = subprocess.run([sys.executable, "-c", code, tests], capture_output=True, text=True, env=env)
    assert again.stdout.split() == ["True", "True", "True"], again.stderr[-2000:]


def test_warmup_prepares_the_named_learners(invoke_cli):
    r = invoke_cli("warmup", "--algo", "adagrad", "--algo", "mission")
    assert r.exit_code == 0, r.output
    assert re.findall(r"^(\S+): ready \([\d.]+ s\)$", r.output, re.M) == ["adagrad", "mission"]
    r = invoke_cli("warmup", "--algo", "nope")
    assert r.exit_code == 2


_BLAS_PROBE = """import sys, types
sys.path.insert(0, sys.argv[1])
stub = types.ModuleType("streamlearn.cli")  # the command: numpy's BLAS threads, as the CLI would import it


def main():
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_info
    print(sorted(i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas"))


stub.main = main
import streamlearn  # noqa: E402 (the package imports no numpy)
sys.modules["streamlearn.cli"] = stub
from streamlearn.__main__ import entry  # noqa: E402
entry()
"""


def test_the_command_runs_blas_on_one_thread_unless_the_user_chose():
    """OpenBLAS's thread pool costs ~0.1 s of CPU at every start, for the small products a command
    does: the entry point sets OPENBLAS_NUM_THREADS=1 before numpy is imported; a user's value stays."""
    pytest.importorskip("threadpoolctl")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    run = lambda e: subprocess.run([sys.executable, "-c", _BLAS_PROBE, str(ROOT)], capture_output=True, text=True,
                                   env=e, check=True).stdout.strip()
    got = run(env)
    if got == "[]":
        pytest.skip("numpy here is not built on OpenBLAS")
    assert got == "[1]"
    assert run({**env, "OPENBLAS_NUM_THREADS": "2"}) == "[2]"
