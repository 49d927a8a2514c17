"""Option values out of range are usage errors (exit 2, one line, no traceback, nothing
written), and numpy RuntimeWarnings never reach stderr under ``--quiet`` (issue 16, defect 9).

The ranges are declared on each :class:`streamlearn.algos.Param` (``low`` / ``high``, floats
finite) and checked for every value given: the command line, the Python API, ``-i``
overrides (and a model file's header, through the learner's constructor)."""
from __future__ import annotations

import json
import math

import pytest

from conftest import ROOT
from streamlearn.algos import LEARNERS
from streamlearn.algos.base import COMMON_PARAMS

DATA = ROOT / "sample_data" / "a9a_train_3k.libsvm.gz"

BAD = [
    ["-l", "-1"], ["-l", "inf"], ["-l", "nan"], ["-l", "0"],
    ["-P", "0"], ["-P", "abc"], ["-P", "nan"], ["-P", "inf"], ["-P", "1.0"],
    ["--algo", "oja-son", "--sketch_size", "100000"],
    ["--algo", "bear", "--sketch_width", "4294967295"],
    ["--algo", "bear", "--sketch_width", "4294967296"],
    ["--oaa", "1e8"], ["--oaa", "100000000", "-b", "32"], ["--oaa", "70000", "-b", "32", "--algo", "oja-son"],
    ["--algo", "bear", "--top_k", "200000000"], ["--algo", "bear", "--sketch_rows", "100000"],
    ["--algo", "bear", "--history", "100000000"], ["--algo", "mission", "--minibatch", "1000000000000"],
    ["--algo", "oja-son", "--oja_t0", "-5"], ["--algo", "oja-son", "--max_cond", "nan"],
    ["--algo", "oja-son", "--alpha", "inf"], ["--algo", "oja-son", "--step_power", "nan"],
    ["--l1", "inf"], ["--l2", "-1"], ["--power_t", "inf"], ["--initial_t", "-1"],
    ["--loss_function", "quantile", "--quantile_tau", "1"],
    ["--algo", "bear", "--t0", "inf"], ["--algo", "mission", "-l", "-1"], ["--algo", "bear", "--curvature_damping", "-1"],
    ["--random_seed", "-1"], ["--algo", "bear", "--sketch_seed", str(2**64)], ["-b", "33"],
    ["--algo", "mission", "-b", "1"], ["--algo", "bear", "--sketch_bytes", "10"],
]


@pytest.mark.parametrize("args", BAD, ids=" ".join)
def test_bad_option_value_is_a_usage_error(args, invoke_cli, tmp_path):
    model = tmp_path / "m.slm"
    r = invoke_cli("train", str(DATA), *args, "-f", str(model), "--quiet")
    assert r.exit_code == 2, (r.exit_code, r.output[-2000:])
    assert "Traceback" not in r.output and "Error: " in r.output
    assert not model.exists()


def test_the_message_names_the_option_and_its_range(invoke_cli):
    r = invoke_cli("train", str(DATA), "--algo", "oja-son", "--sketch_size", "100000")
    assert "-m/--sketch_size must be <= 1024 (m x m matrices" in r.output and "got 100000" in r.output
    for algo in ("fd-son", "rfd-son"):  # each learner enforces its own range and says whose it is
        r = invoke_cli("train", str(DATA), "--algo", algo, "--sketch_size", "1025")
        assert r.exit_code == 2 and f"--algo {algo}: -m/--sketch_size must be <= 1024 (2m x 2m" in r.output
    r = invoke_cli("train", str(DATA), "--algo", "bear", "--sketch_rows", "0")
    assert "--sketch_rows must be >= 1, got 0" in r.output
    r = invoke_cli("train", str(DATA), "-l", "inf")
    assert "-l/--learning_rate must be a finite number, got inf" in r.output
    r = invoke_cli("train", str(DATA), "--algo", "bear", "-b", "1")  # a width of 0 derived from -b: say from what
    assert r.exit_code == 2 and "sketch width 0 out of range" in r.output and "2^1 cells (-b) / 5 rows" in r.output


def test_help_shows_the_ranges(invoke_cli):
    """Every option's help shows its default and range; an option several learners declare
    differently shows each learner's own wording, default and range, tagged with the learners."""
    out = " ".join(invoke_cli("train", "--help").output.split())
    assert "(default: 10; in 0..1024) [oja-son]" in out
    assert "m - 1 directions kept (0 = online gradient descent with step 1/alpha). (default: 10; in 0..1024) " \
           "[fd-son, rfd-son]" in out
    assert "Oja-SON: re-materialise the sketch when the bound on cond(Z) exceeds this. (default: 10000.0; >= 1) " \
           "[oja-son]" in out
    assert "(default: 0.25; >= 0) [rfd-son]" in out  # --alpha0, declared by one learner only
    assert "--max_example_features" in out and "--max_line_bytes" in out


def test_every_numeric_param_refuses_nan_inf_and_values_past_its_bounds():
    """Generic over every learner's declared options: floats must be finite; a bound is
    enforced on its own side (open or closed) and a value inside it passes."""
    params = {(p.name, id(p)): p for p in COMMON_PARAMS}
    for cls in LEARNERS.values():
        params.update({(p.name, id(p)): p for p in cls.PARAMS})
    checked = 0
    for p in params.values():
        if p.type not in (int, float):
            continue
        if p.type is float:
            with pytest.raises(ValueError, match="number"):
                p.check(math.nan)
            for v in (math.inf, -math.inf) if p.finite else ():
                with pytest.raises(ValueError, match="finite"):
                    p.check(v)
        with pytest.raises(ValueError):
            p.check("3")
        if p.low is not None:
            with pytest.raises(ValueError):
                p.check(p.low if p.low_open else p.low - 1)
            inside = p.low + (0.5 if p.type is float else 1) if p.low_open else p.low
            if p.high is not None:
                inside = min(inside, p.high)
            p.check(inside)
            checked += 1
        if p.high is not None:
            with pytest.raises(ValueError):
                p.check(p.high if p.high_open else p.high + 1)
    assert checked >= 20


def test_api_and_override_check_the_ranges_too(tmp_path, invoke_cli):
    from streamlearn.api import make_learner
    from streamlearn.errors import ConfigError

    for algo, hyper in [("adagrad", {"learning_rate": math.inf}), ("oja-son", {"sketch_size": 5000}),
                        ("adagrad", {"oaa": 10**8, "bit_precision": 32}), ("bear", {"t0": -1.0})]:
        with pytest.raises(ConfigError):
            make_learner(algo, hyper)
    model = tmp_path / "m.slm"
    assert invoke_cli("train", str(DATA), "-f", str(model), "--quiet").exit_code == 0
    r = invoke_cli("train", str(DATA), "-i", str(model), "-l", "nan", "--quiet")
    assert r.exit_code == 2 and "-l/--learning_rate must be a finite number" in r.output


def test_a_model_header_out_of_range_is_refused():
    """A learner built from a saved header goes through the same checks (the model loader
    turns the ValueError into a model-file error)."""
    from streamlearn.algos.oja_son import OjaSON

    meta, arrays = OjaSON(sketch_size=4).state_dict()
    meta["hyper"]["sketch_size"] = 12000
    with pytest.raises(ValueError, match="sketch_size"):
        OjaSON.from_state(meta, arrays)


# ------------------------------------------------------------------------------ warnings

def test_no_runtime_warning_under_quiet(tmp_path, run_cli):
    """Labels of 1e200 (finite: not malformed) square past the double range in the summary's
    sums, and --link logistic takes exp(-p) of a score below -709: neither prints a numpy
    RuntimeWarning (the sums are inf, truly: the best constant is left out)."""
    big = tmp_path / "big.vw"
    big.write_text("".join(f"{'1e200' if i % 2 else '-1e200'} |x a:1 b:2\n" for i in range(40)))
    neg = tmp_path / "neg.vw"
    neg.write_text("-1e250 |x a:1 b:2\n" * 40)
    m = tmp_path / "m.json"
    for env in ({}, {"STREAMLEARN_NO_C": "1"}):
        r = run_cli("train", big, "--quiet", "--metrics", m, text=True, env=env)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert json.loads(m.read_text())["best_constant_loss"] is None
        r = run_cli("train", neg, "--quiet", "--link", "logistic", "-p", tmp_path / "p.txt", text=True, env=env)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert (tmp_path / "p.txt").read_text().splitlines()[-1] == "0"
