"""The VW flags of the reader and output side on the command line: --audit, --readable_model
and --invert_hash against VW 9.11.9's outputs (tests/data/vwflags_*, made by
tests/data/make_vwflags_golden.sh; both tools' default learner), the reader
flags stored in the model and applied by predict, predict's rejection of training options,
and the flags accepted with no effect (--holdout_off, -c, --cache_file)."""
import re

import numpy as np
import pytest

from streamlearn.io.model_file import read_model

from conftest import DATA

INPUT = DATA / "vwflags_input.vw"
CASES = {"vwflags_q_cubic": ["-q", "ab", "--cubic", "::c"],
         "vwflags_wild_ignore": ["-q", "::", "--ignore", "c"]}


def _audit(text):
    """[(prediction, tag, [(name, index, value, weight, G)])] of VW audit output."""
    out, lines = [], text.splitlines()
    for head, feats in zip(lines[0::2], lines[1::2]):
        p, _, tag = head.partition(" ")
        rows = []
        for f in feats.strip("\t").split("\t"):
            name, idx, val, wg = f.rsplit(":", 3)
            w, _, g = wg.partition("@")
            rows.append((name, int(idx), float(val), float(w), float(g)))
        out.append((float(p), tag, rows))
    return out


def _weights(path):
    """{index: (name or None, [w, G, N])} of a VW text model (header lines skipped)."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"(?:(.*):)?(\d+):([-+0-9.e]+(?: [-+0-9.e]+)+)", line)
        if m:
            out[int(m.group(2))] = (m.group(1), [float(x) for x in m.group(3).split()])
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_audit_is_vws(case, invoke_cli):
    r = invoke_cli("train", INPUT, "-b", "18", "--quiet", "--audit", *CASES[case])
    assert r.exit_code == 0, r.output
    got, exp = _audit(r.stdout), _audit((DATA / f"{case}_audit.txt").read_text())
    assert len(got) == len(exp) == 20
    for (p, tag, rows), (ep, etag, erows) in zip(got, exp):
        assert tag == etag and p == pytest.approx(ep, abs=2e-6)
        assert sorted(r[:3] for r in rows) == sorted(r[:3] for r in erows)  # names, indices, values
        by = {r[:3]: r[3:] for r in rows}
        for r_ in erows:
            np.testing.assert_allclose(by[r_[:3]], r_[3:], rtol=1e-4, atol=1e-6)
        key = [abs(w * v) for _, _, v, w, _ in rows]  # VW's order: largest |weight * value| first
        assert key == sorted(key, reverse=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_readable_model_and_invert_hash_are_vws(case, invoke_cli, tmp_path):
    rd, inv = tmp_path / "r.txt", tmp_path / "i.txt"
    r = invoke_cli("train", INPUT, "-b", "18", "--quiet", "--readable_model", rd,
                   "--invert_hash", inv, *CASES[case])
    assert r.exit_code == 0, r.output
    head = rd.read_text().splitlines()[:9]
    assert head[0].startswith("Version streamlearn") and head[4] == "bits:18"
    assert head[8] == "options: " + " ".join(
        f"--{'quadratic' if a == '-q' else a.lstrip('-')} {b}" for a, b in zip(CASES[case][::2], CASES[case][1::2]))
    for mine, vws in ((rd, f"{case}_readable.txt"), (inv, f"{case}_invert.txt")):
        got, exp = _weights(mine), _weights(DATA / vws)
        assert sorted(got) == sorted(exp)
        for k, (name, cols) in exp.items():
            assert got[k][0] == name, k
            np.testing.assert_allclose(got[k][1], cols, rtol=1e-4, atol=1e-7)
    assert _weights(inv)[116060][0] == "Constant"


def test_oaa_readable_model_and_invert_hash_are_vws(invoke_cli, tmp_path):
    """--oaa 26: VW's layout (class c of feature i at (i << 5) | c, named f[c] for c > 0),
    the label range of the class learners (-1..1) and --oaa in the options line
    (tests/data/oaa_golden_*.txt from make_oaa_vw_golden.sh)."""
    rd, inv = tmp_path / "r.txt", tmp_path / "i.txt"
    r = invoke_cli("train", DATA / "oaa_golden_input.vw", "--oaa", "26", "-b", "12", "--quiet",
                   "--readable_model", rd, "--invert_hash", inv)
    assert r.exit_code == 0, r.output
    head, vw_head = rd.read_text().splitlines()[:9], (DATA / "oaa_golden_readable.txt").read_text().splitlines()[:9]
    assert head[2:] == vw_head[2:]  # Min/Max label, bits, ..., "options: --oaa 26"
    for mine, vws in ((rd, "oaa_golden_readable.txt"), (inv, "oaa_golden_invert.txt")):
        got, exp = _weights(mine), _weights(DATA / vws)
        assert len(exp) == 26 * 17 and sorted(got) == sorted(exp)
        for k, (name, cols) in exp.items():
            assert got[k][0] == name, k
            np.testing.assert_allclose(got[k][1], cols, rtol=1e-4, atol=1e-7)
    assert _weights(inv)[35][0] == "1[3]"


@pytest.mark.parametrize("args,msg", [
    (["--algo", "mission"], "learners that have: adagrad"),
    (["--algo", "oja-son", "--oaa", "3"], "learners that have: adagrad"),
    (["--oaa", "3", "--loss_function", "multiclass_logistic"], "one-against-all over adagrad has"),
])
def test_inspection_needs_a_weight_per_hash(args, msg, invoke_cli, tmp_path):
    r = invoke_cli("train", INPUT, *args, "--readable_model", tmp_path / "r.txt")
    assert r.exit_code == 2 and msg in r.output, r.output
    assert not (tmp_path / "r.txt").exists()


def test_model_keeps_the_reader_flags_and_predict_applies_them(invoke_cli, tmp_path):
    flags = ["--cubic", "a::", "--interactions", "abcb", "--ignore", "c", "--keep", "ab ",
             "--ignore_linear", "b", "--leave_duplicate_interactions"]
    m, plain = tmp_path / "m.slm", tmp_path / "plain.slm"
    assert invoke_cli("train", INPUT, "--quiet", "-f", m, *flags).exit_code == 0
    assert invoke_cli("train", INPUT, "--quiet", "-f", plain).exit_code == 0
    header, _ = read_model(str(m))
    assert header["reader"]["cubic"] == ["a::"] and header["reader"]["ignore_linear"] == ["b"]
    assert header["reader"]["leave_duplicate_interactions"] is True
    p1, p2, p3 = (tmp_path / f"p{i}.txt" for i in range(3))
    assert invoke_cli("predict", "-i", m, INPUT, "-p", p1, "--quiet").exit_code == 0
    assert invoke_cli("train", "-i", m, "-t", INPUT, "-p", p2, "--quiet").exit_code == 0
    assert invoke_cli("predict", "-i", plain, INPUT, "-p", p3, "--quiet").exit_code == 0
    assert p1.read_text() == p2.read_text() != p3.read_text()
    r = invoke_cli("train", "-i", m, INPUT, "--cubic", "abc")
    assert r.exit_code == 2 and "--cubic differs from the model's" in r.output


@pytest.mark.parametrize("flag", [["-q", "ab"], ["--cubic", "abc"], ["--interactions", "abc"], ["--ignore", "a"],
                                  ["--keep", "a"], ["--ignore_linear", "a"], ["--noconstant"], ["-l", "0.5"],
                                  ["-b", "20"], ["--loss_function", "logistic"], ["--passes", "2"],
                                  ["--leave_duplicate_interactions"]])
def test_predict_rejects_training_options(flag, invoke_cli, tmp_path):
    m = tmp_path / "m.slm"
    assert invoke_cli("train", INPUT, "--quiet", "-f", m).exit_code == 0
    r = invoke_cli("predict", "-i", m, INPUT, *flag)
    assert r.exit_code == 2
    assert f"{flag[0]} is a training option: the model fixes it" in r.output


def test_vw_cache_and_holdout_flags_are_accepted_with_no_effect(invoke_cli, tmp_path):
    p1, p2 = tmp_path / "a.txt", tmp_path / "b.txt"
    cache = tmp_path / "x.cache"
    assert invoke_cli("train", INPUT, "--quiet", "-p", p1).exit_code == 0
    r = invoke_cli("train", INPUT, "--quiet", "-p", p2, "--holdout_off", "-c", "--cache_file", cache)
    assert r.exit_code == 0, r.output
    assert p1.read_text() == p2.read_text() and not cache.exists()
    help_text = " ".join(invoke_cli("train", "--help").output.split())
    assert "--holdout_off" in help_text and "'streamlearn convert' to Parquet is its cache" in help_text


def test_wildcard_quadratic_now_interacts(invoke_cli, tmp_path):
    """-q :: used to be accepted and do nothing; it now pairs every namespace seen (VW 9)."""
    import json
    out = {}
    for name, extra in (("plain", []), ("wild", ["-q", "::"])):
        met = tmp_path / f"{name}.json"
        assert invoke_cli("train", INPUT, "--quiet", "--metrics", met, *extra).exit_code == 0
        out[name] = json.loads(met.read_text())["total_features"]
    assert out["wild"] > 2 * out["plain"]


@pytest.mark.parametrize("algo", ["oja-son", "bear", "mission"])
def test_audit_of_the_other_learners_names_vws_features(algo, invoke_cli):
    """Learners without VW's weight table audit the same features (names, indices, values) as
    VW, each with the weight it has for the feature (Oja-SON: u_bar + Z^T b; BEAR, MISSION:
    the sketch's estimate)."""
    r = invoke_cli("train", INPUT, "--algo", algo, "-b", "18", "--quiet", "--audit", *CASES["vwflags_q_cubic"])
    assert r.exit_code == 0, r.output
    exp = _audit((DATA / "vwflags_q_cubic_audit.txt").read_text())
    lines = r.stdout.splitlines()
    assert len(lines) == 2 * len(exp)
    for feats, (_, tag, erows) in zip(lines[1::2], exp):
        got = [f.rsplit(":", 3) for f in feats.strip("\t").split("\t")]
        assert sorted((n, int(i), float(v)) for n, i, v, _ in got) == sorted(r_[:3] for r_ in erows)
        assert all(np.isfinite(float(w)) for *_, w in got)


def test_unknown_vw_options_say_so_and_suggestions_are_typos(invoke_cli):
    from streamlearn.cli.options import VW_ONLY_OPTIONS
    from streamlearn.cli.predict import predict
    from streamlearn.cli.train import train
    real = {o for c in (train, predict) for p in c.params for o in [*p.opts, *p.secondary_opts]}
    assert not VW_ONLY_OPTIONS & real  # the list names only options streamlearn lacks
    r = invoke_cli("train", INPUT, "--bfgs")
    assert r.exit_code == 2 and "a Vowpal Wabbit option streamlearn does not have" in r.output
    r = invoke_cli("train", INPUT, "--loss_fuction", "logistic")
    assert r.exit_code == 2 and "Did you mean" in r.output and "loss" in r.output.split("Did you mean")[1]
    r = invoke_cli("train", INPUT, "--sketchy", "3")  # nothing close: no suggestion
    assert r.exit_code == 2 and "Did you mean" not in r.output
