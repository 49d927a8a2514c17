"""Adding a learner takes its two files and one registry entry: the toy learner of tests/toy/
(``toy.py``: a class with PARAMS; ``_toy_kernels.py``: its kernel and state tuple) is registered in
``LEARNERS`` and trained, saved, loaded, continued and used for predictions through ``api`` on a
sample file, with nothing in ``cli``, ``api``, ``evaluate`` or the readers changed."""
import gzip
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

from conftest import A9A, A9A_TEST  # noqa: E402
from streamlearn import api  # noqa: E402
from streamlearn.algos import LEARNERS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy.toy import Toy  # noqa: E402


def _run(fn, data, **kw):
    return fn(api.RunConfig(data=[str(d) for d in data], quiet=True, **kw))


def _lines(path):
    return Path(path).read_text().splitlines()


def test_a_registered_learner_runs_through_the_api(tmp_path, monkeypatch):
    monkeypatch.setitem(LEARNERS, Toy.name, Toy)
    rows = gzip.decompress(A9A.read_bytes()).splitlines(keepends=True)
    (tmp_path / "a.txt").write_bytes(b"".join(rows[:1500]))
    (tmp_path / "b.txt").write_bytes(b"".join(rows[1500:]))
    hyper = {"bit_precision": 12, "loss_function": "logistic", "learning_rate": 0.1}
    s = _run(api.train, [A9A], algo="toy", hyper=hyper, final_model=str(tmp_path / "whole.slm"),
             predictions=str(tmp_path / "pw_train.txt"))
    assert s["examples"] == 3000 and 0 < s["average_loss"] < np.log(2)  # it learns
    _run(api.train, [tmp_path / "a.txt"], algo="toy", hyper=hyper, final_model=str(tmp_path / "half.slm"))
    _run(api.train, [tmp_path / "b.txt"], initial_model=str(tmp_path / "half.slm"),
         final_model=str(tmp_path / "cont.slm"), predictions=str(tmp_path / "pc_train.txt"))
    # continuing from the saved model is the uninterrupted run: the same progressive predictions
    # of the second half, the same final state, the same test predictions
    assert _lines(tmp_path / "pc_train.txt") == _lines(tmp_path / "pw_train.txt")[1500:]
    whole, _, header = api.load_model(str(tmp_path / "whole.slm"))
    cont, _, _ = api.load_model(str(tmp_path / "cont.slm"))
    assert isinstance(whole, Toy) and header["algo"] == "toy"
    assert whole.examples_learned == cont.examples_learned == 3000 and whole.t[0] == 3000
    wa, ca = whole.state_dict()[1], cont.state_dict()[1]
    assert wa.keys() == ca.keys() and all(np.array_equal(wa[k], ca[k]) for k in wa)
    _run(api.predict, [A9A_TEST], initial_model=str(tmp_path / "whole.slm"), predictions=str(tmp_path / "pw.txt"))
    _run(api.predict, [A9A_TEST], initial_model=str(tmp_path / "cont.slm"), predictions=str(tmp_path / "pc.txt"))
    assert _lines(tmp_path / "pw.txt") == _lines(tmp_path / "pc.txt") and len(_lines(tmp_path / "pw.txt")) == 1000


def test_a_registered_learner_gets_oaa_without_code_of_its_own(tmp_path, monkeypatch):
    """--oaa K works for any registered learner through the one-against-all reduction: train,
    save, reload and predict (the reloaded model's predictions are the trained one's)."""
    from conftest import ROOT

    monkeypatch.setitem(LEARNERS, Toy.name, Toy)
    src = ROOT / "tests" / "data" / "oaa_golden_input.vw"
    hyper = {"bit_precision": 12, "loss_function": "logistic", "learning_rate": 0.1, "oaa": 26}
    s = _run(api.train, [src], algo="toy", hyper=hyper, final_model=str(tmp_path / "m.slm"))
    assert s["examples"] == 400 and s["learner"] == {"oaa_classes": 26, "bits_per_class": 7}
    assert s["average_loss"] < 0.9  # the 0/1 loss (0.87 here); always one class: 0.96
    model, _, header = api.load_model(str(tmp_path / "m.slm"))
    assert header["algo"] == "toy" and model.multiclass and all(isinstance(c, Toy) for c in model.learners)
    _run(api.predict, [src], initial_model=str(tmp_path / "m.slm"), predictions=str(tmp_path / "p.txt"))
    _run(api.train, [src], algo="toy", hyper=hyper, test_only=True, initial_model=str(tmp_path / "m.slm"),
         predictions=str(tmp_path / "t.txt"))
    p = _lines(tmp_path / "p.txt")
    assert p == _lines(tmp_path / "t.txt") and len(p) == 400 and {x.split()[0] for x in p} <= {str(c) for c in range(1, 27)}
