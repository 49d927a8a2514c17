"""Big hashed tables (issue 15 part 6): a learner that tracks the pages its updates touch
(:class:`streamlearn.memory.PageSet`) saves and loads in O(touched entries), in exactly the
bytes a scan of the whole table gives."""
import numpy as np
import pytest

from streamlearn.api import load_model, make_learner, save_model
from streamlearn.batch import Batch
from streamlearn.io.model_file import read_model, write_model
from streamlearn.memory import PageSet, SparseTable

_BITS = {4: np.uint32, 8: np.uint64}


def _nonzero_ref(a):
    """The obvious reference: every entry whose bit pattern is not zero (-0.0, NaN count)."""
    return np.flatnonzero(a.view(_BITS[a.dtype.itemsize]))


def _stream(n, d, seed, bits):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.choice([1e-3, 1.0, 50.0], d)
    X[rng.random((n, d)) < 0.8] = 0
    y = np.where(X @ rng.standard_normal(d) > 0, 1.0, -1.0)
    hashes = rng.integers(0, 2**32, d, dtype=np.uint64).astype(np.uint32)
    return Batch.from_dense(X, y, hashes=hashes)


def test_pageset_table_equals_a_scan():
    size = 1 << 22
    rng = np.random.default_rng(1)
    a = np.zeros(size, np.float32)
    idx = rng.integers(0, size, 3000)
    a[idx] = rng.standard_normal(idx.size).astype(np.float32)
    a[idx[:5]] = -0.0
    a[idx[5:8]] = np.nan
    a[idx[8:20]] = 0.0  # written, but zero: not stored
    ps = PageSet(size)
    assert ps.active
    ps.mark(idx.astype(np.uint32) | np.uint32(0xFFC00000), size - 1)  # high bits masked off
    t = ps.table(a)
    ref = _nonzero_ref(a)
    np.testing.assert_array_equal(t.idx, ref)
    assert t.vals.tobytes() == a[ref].tobytes()
    assert np.asarray(t).tobytes() == a.tobytes()
    # loaded entries and a dense scan mark the same pages as the updates did
    for how in ("entries", "nonzero"):
        q = PageSet(size)
        q.mark_entries(ref) if how == "entries" else q.mark_nonzero(a)
        assert set(np.flatnonzero(q.bits)) <= set(np.flatnonzero(ps.bits))
        np.testing.assert_array_equal(q.table(a).idx, ref)


def test_small_tables_are_not_tracked():
    ps = PageSet(1 << 21)
    assert not ps.active
    a = np.ones(1 << 21, np.float32)
    assert ps.table(a) is a


@pytest.mark.parametrize("nnz", [40, 3000])  # sparse encoding, and raw (sparse would not pay)
def test_sparse_table_writes_the_bytes_of_the_dense_array(tmp_path, nnz):
    rng = np.random.default_rng(2)
    dense = np.zeros(4096, np.float64)
    dense[rng.choice(4096, nnz, replace=False)] = rng.standard_normal(nnz)
    nz = _nonzero_ref(dense)
    t = SparseTable(dense.size, dense.dtype, nz, dense[nz])
    write_model(str(tmp_path / "a.slm"), "x", {}, {"w": dense}, {})
    write_model(str(tmp_path / "b.slm"), "x", {}, {"w": t}, {})
    assert (tmp_path / "a.slm").read_bytes() == (tmp_path / "b.slm").read_bytes()
    _, back = read_model(str(tmp_path / "b.slm"), sparse=True)
    assert np.asarray(back["w"]).tobytes() == dense.tobytes()
    assert isinstance(back["w"], SparseTable) == (nnz == 40)


@pytest.mark.parametrize("rule", [{}, {"adaptive": True}, {"sgd": True, "l1": 1e-4}])
def test_adagrad_big_table_saves_loads_and_continues_as_a_scan_would(tmp_path, rule):
    """-b 22 (tracked): the saved file equals the one written from a full scan of the tables,
    and a model loaded sparse continues bit for bit like one loaded from dense arrays."""
    hyper = {"bit_precision": 22, "loss_function": "logistic", **rule}
    first, second = _stream(400, 60, 3, 22), _stream(300, 60, 4, 22)
    a = make_learner("adagrad", dict(hyper))
    a.learn_batch(first)
    assert a.pages.active and 0 < a.pages.bits.sum() <= 60
    save_model(str(tmp_path / "tracked.slm"), a, {})
    a.pages.active = False  # state_dict gives the dense tables: model_file scans them
    save_model(str(tmp_path / "scan.slm"), a, {})
    a.pages.active = True
    assert (tmp_path / "tracked.slm").read_bytes() == (tmp_path / "scan.slm").read_bytes()

    b, _, _ = load_model(str(tmp_path / "tracked.slm"))  # sparse arrays
    header, dense = read_model(str(tmp_path / "tracked.slm"))  # dense arrays
    c = type(a).from_state(header["meta"], dense)
    for learner in (a, b, c):
        learner.learn_batch(second)
    save_model(str(tmp_path / "a2.slm"), a, {})
    for other in (b, c):
        save_model(str(tmp_path / "o.slm"), other, {})
        assert (tmp_path / "o.slm").read_bytes() == (tmp_path / "a2.slm").read_bytes()
        np.testing.assert_array_equal(other.predict_batch(first)[0], a.predict_batch(first)[0])


def test_b32_model_round_trip(tmp_path, cli_ok, run_cli):
    """-b 32 (2^32-entry tables, tens of GB of address space never touched): train, save, load,
    predict and continue, with the loaded model predicting what the trained one did."""
    from conftest import NEWS, NEWS_TEST

    m, m2 = tmp_path / "m.slm", tmp_path / "m2.slm"
    p_train, p1, p2 = tmp_path / "pt.txt", tmp_path / "p1.txt", tmp_path / "p2.txt"
    cli_ok(run_cli("train", str(NEWS), str(NEWS_TEST), "-b", "32", "--quiet", "-p", str(p_train)))
    cli_ok(run_cli("train", str(NEWS), "-b", "32", "-f", str(m), "--quiet"))
    cli_ok(run_cli("predict", "-i", str(m), str(NEWS_TEST), "-p", str(p1), "--quiet"))
    cli_ok(run_cli("train", "-i", str(m), str(NEWS_TEST), "-f", str(m2), "-p", str(p2), "--quiet"))
    # continuing over the test file predicts as the uninterrupted run over both files did
    n_test = len(p1.read_text().splitlines())
    assert p2.read_text().splitlines() == p_train.read_text().splitlines()[-n_test:]
    assert 0 < m.stat().st_size < 2_000_000
    _, arrays = read_model(str(m2), sparse=True)
    assert isinstance(arrays["w"], SparseTable) and arrays["w"].size == 2**32


def test_a_model_larger_than_memory_is_a_usage_error(invoke_cli):
    """Tables that cannot be allocated (here a 93 GiB sketch) stop with exit 2 naming the sizes,
    for every learner (api.make_learner), not a MemoryError traceback."""
    from conftest import A9A_TEST

    r = invoke_cli("train", A9A_TEST, "--algo", "mission", "--sketch_bytes", 100_000_000_000, "--quiet")
    assert r.exit_code == 2, r.output
    assert "does not fit in this machine's memory" in r.output and "--sketch_bytes 100000000000" in r.output
