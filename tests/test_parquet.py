"""Parquet input (both schemas, directories, bounded batches, schema errors) and the
prefetch iterator."""
import gc
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamlearn.api import RunConfig, train
from streamlearn.batch import concat_batches
from streamlearn.errors import InputError
from streamlearn.io import ReaderConfig, read_batches
from streamlearn.io.prefetch import Prefetcher, prefetch

from conftest import DATA  # noqa: E402


def _read(path, **kw):
    return list(read_batches([str(path)], ReaderConfig(**kw)))


def _same(a_batches, b_batches, names=False):
    a, b = concat_batches(a_batches), concat_batches(b_batches)
    np.testing.assert_array_equal(a.offsets, b.offsets)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.weights, b.weights)
    tags_a = [t for x in a_batches for t in x.tags()]
    tags_b = [t for x in b_batches for t in x.tags()]
    assert tags_a == tags_b
    if names:
        na = [x.feature_name(k) for x in a_batches for k in range(x.nnz)]
        nb = [x.feature_name(k) for x in b_batches for k in range(x.nnz)]
        assert na == nb


# --- schemas --------------------------------------------------------------------------------

@pytest.mark.parametrize("constant", [True, False])
def test_sparse_indices_schema_equals_text(constant):
    pqb = _read(DATA / "pq_sparse.parquet", constant=constant)
    txt = _read(DATA / "pq_sparse.vw", constant=constant)
    _same(pqb, txt)
    b = pqb[0]
    assert np.isnan(b.labels[2])  # null label = unlabeled
    assert b.weights[2] == 1.0  # null weight = 1
    assert b.tags() == ["ex1", None, "ex3", "ex4"]
    assert list(b.lines) == [1, 2, 3, 4]
    assert b.extra["errors"] == []


def test_namespace_columns_hash_like_vw_text_with_quadratic_and_names():
    for q in [(), ("ab",), ("aa", "ba")]:
        pqb = _read(DATA / "pq_namespaces.parquet", quadratic=q, keep_names=True)
        txt = _read(DATA / "pq_namespaces.vw", quadratic=q, keep_names=True)
        _same(pqb, txt, names=True)
    assert pqb[0].feature_name(0) == "a^x"


def test_wide_schema_with_label_column():
    pqb = _read(DATA / "pq_wide.parquet", label_column="y", keep_names=True)
    txt = _read(DATA / "pq_wide.vw", keep_names=True)
    _same(pqb, txt, names=True)


def test_wide_schema_default_label_column(tmp_path):
    t = pa.table({"label": [1.0, -1.0], "x": [2.0, 0.0], "weight": [1.0, 2.0]})
    pq.write_table(t, tmp_path / "w.parquet")
    b = _read(tmp_path / "w.parquet", constant=False)[0]
    from streamlearn.io.hashing import feature_hash
    assert list(b.indices) == [feature_hash("x")]
    assert list(b.labels) == [1.0, -1.0] and list(b.weights) == [1.0, 2.0]


def test_parquet_sniffed_by_magic_and_format_flag(tmp_path):
    p = tmp_path / "no_extension"
    shutil.copy(DATA / "pq_sparse.parquet", p)
    _same(_read(p), _read(DATA / "pq_sparse.vw"))
    _same(_read(p, fmt="parquet"), _read(DATA / "pq_sparse.vw"))


def test_directory_of_files_in_order(tmp_path):
    src = pq.read_table(DATA / "pq_sparse.parquet")
    d = tmp_path / "ds"
    (d / "part=b").mkdir(parents=True)
    pq.write_table(src.slice(0, 2), d / "a.parquet")
    pq.write_table(src.slice(2, 2), d / "part=b" / "c.parquet")
    (d / "_SUCCESS").write_text("")
    cfg = RunConfig(data=[str(d)], quiet=True, hyper={"loss_function": "logistic"})
    whole = train(RunConfig(data=[str(DATA / "pq_sparse.parquet")], quiet=True,
                            hyper={"loss_function": "logistic"}))
    parts = train(cfg)
    assert parts["examples"] == whole["examples"] == 4
    assert parts["average_loss"] == whole["average_loss"]


def test_a_directorys_files_that_are_not_parquet_are_named_in_one_warning_and_not_read(tmp_path):
    """A text shard dropped among Parquet files is not read (a directory gives its .parquet files):
    the run says so once, naming the files (hidden and _-prefixed ones are not data and not named),
    learns exactly what the Parquet files alone give, and is silent under --quiet."""
    src = pq.read_table(DATA / "pq_sparse.parquet")
    d = tmp_path / "ds"
    (d / "sub").mkdir(parents=True)
    (d / ".hidden").mkdir()
    pq.write_table(src, d / "a.parquet")
    (d / "shard.vw").write_text("1 | a b\n")
    (d / "sub" / "more.libsvm").write_text("1 1:1\n")
    (d / "_SUCCESS").write_text("")
    (d / ".crc").write_text("")
    (d / ".hidden" / "x.vw").write_text("1 | a\n")
    hyper = {"loss_function": "logistic"}
    lines = []
    got = train(RunConfig(data=[str(d)], hyper=hyper, table=False), log=lines.append)
    warned = [ln for ln in lines if ln.startswith("warning:")]
    assert warned == [f"warning: {d}: 2 files not ending in .parquet are not read (shard.vw, sub/more.libsvm); a "
                      "directory gives its .parquet files only: name text files on the command line, or "
                      "'streamlearn convert' them"]
    alone = train(RunConfig(data=[str(d / "a.parquet")], quiet=True, hyper=hyper))
    assert got["examples"] == alone["examples"] == 4 and got["average_loss"] == alone["average_loss"]
    quiet = []
    train(RunConfig(data=[str(d)], hyper=hyper, quiet=True), log=quiet.append)
    assert quiet == []
    for f in ("shard.vw", "sub/more.libsvm"):
        (d / f).unlink()
    lines.clear()
    train(RunConfig(data=[str(d)], hyper=hyper, table=False), log=lines.append)
    assert not [ln for ln in lines if ln.startswith("warning:")]


def test_empty_directory_is_an_input_error(tmp_path):
    (tmp_path / "e").mkdir()
    with pytest.raises(InputError, match="no .parquet files"):
        train(RunConfig(data=[str(tmp_path / "e")], quiet=True))


def test_batches_bounded_by_batch_rows(tmp_path):
    """A file is streamed: many small batches, never the whole file at once."""
    n = 5000
    rng = np.random.default_rng(0)
    lens = rng.integers(0, 8, n)
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    idx = pa.ListArray.from_arrays(pa.array(offs), pa.array(rng.integers(0, 2**31, offs[-1]), pa.int64()))
    val = pa.ListArray.from_arrays(pa.array(offs), pa.array(rng.standard_normal(offs[-1])))
    t = pa.table({"label": rng.standard_normal(n), "indices": idx, "values": val})
    pq.write_table(t, tmp_path / "big.parquet", row_group_size=1000)
    cfg = ReaderConfig(parquet_batch_rows=256)
    batches = list(read_batches([str(tmp_path / "big.parquet")], cfg))
    assert len(batches) >= n // 256
    assert max(b.n for b in batches) <= 256
    allb = concat_batches(batches)
    assert allb.n == n
    np.testing.assert_array_equal(np.diff(allb.offsets), lens + 1)  # + constant
    np.testing.assert_array_equal(allb.lines, np.arange(1, n + 1))
    # and the run over it gives the same loss whatever the batch size
    from streamlearn.io.parquet import read_parquet
    from streamlearn.api import make_learner
    from streamlearn.evaluate import run_stream
    losses = []
    for rows in (97, 4096):
        learner = make_learner("adagrad", {})
        ev = run_stream(learner, read_parquet(str(tmp_path / "big.parquet"), ReaderConfig(), batch_rows=rows))
        losses.append(ev.loss_sum)
    assert losses[0] == pytest.approx(losses[1], rel=1e-12)  # sums per batch: rounding only


def test_sliced_list_offsets(tmp_path):
    """Lists whose offsets do not start at 0 (sliced arrays) are read correctly."""
    t = pq.read_table(DATA / "pq_sparse.parquet")
    pq.write_table(t.slice(1), tmp_path / "s.parquet")
    ref = concat_batches(_read(DATA / "pq_sparse.parquet"))
    got = concat_batches(_read(tmp_path / "s.parquet"))
    np.testing.assert_array_equal(got.indices, ref.indices[ref.offsets[1]:])


# --- schema errors --------------------------------------------------------------------------

@pytest.mark.parametrize("table, label_column, pattern", [
    ({"label": [1.0], "indices": pa.array([["a"]]), "values": pa.array([[1.0]])}, None,
     r"column 'indices' has type list<.*string>; expected list<integer>"),
    ({"label": [1.0], "indices": pa.array([[1]])}, None, r"column 'values' is missing"),
    ({"label": [1.0], "indices": pa.array([[1]]), "values": pa.array([["x"]])}, None,
     r"column 'values' has type .*; expected list<float>"),
    ({"label": ["yes"], "f": [1.0]}, None, r"column 'label' has type string; expected a number"),
    ({"label": [1.0], "f": ["x"]}, None, r"column 'f' has type string; expected a number"),
    ({"y": [1.0], "f": [1.0]}, None, r"no Parquet label column 'label'.*--label_column"),
    ({"y": [1.0], "f": [1.0]}, "target", r"no Parquet column 'target' \(--label_column\)"),
    ({"label": [1.0], "ns": pa.array([[1, 2]])}, None,
     r"column 'ns' has type list<.*int64>; expected list<string>"),
    ({"label": [1.0], "tag": [3]}, None, r"column 'tag' has type int64; expected string"),
])
def test_schema_errors_name_column_and_type(tmp_path, table, label_column, pattern):
    pq.write_table(pa.table(table), tmp_path / "bad.parquet")
    with pytest.raises(InputError, match=pattern):
        _read(tmp_path / "bad.parquet", label_column=label_column)


# --- bad rows (issue 6: fuzzing) --------------------------------------------------------------

def _errors(batches):
    return [(ln, why) for b in batches for _, ln, why in b.extra["errors"]]


def test_nonfinite_rows_are_skipped_and_reported(tmp_path):
    """NaN/inf labels and weights, inf feature values and overflowing -q products: the row is
    skipped and reported as file:row (strict: InputError), never passed to a learner. Null
    label = unlabeled and null weight = 1 stay valid; NaN/null feature values are dropped."""
    nan, inf = float("nan"), float("inf")
    t = pa.table({
        "label": [1.0, inf, nan, None, 1.0, 1.0, 1.0, 2.0],
        "weight": [1.0, 1.0, 1.0, None, -inf, nan, 1.0, 1.0],
        "indices": pa.array([[1, 2], [1], [1], [1], [1], [1], [1, 2], [1, 2]]),
        "values": pa.array([[nan, None], [1.0], [1.0], [1.0], [1.0], [1.0], [inf, 1.0],
                            [1e200, 1e200]]),
    })
    p = tmp_path / "nf.parquet"
    pq.write_table(t, p)
    bs = _read(p, constant=False, quadratic=("  ",))
    assert _errors(bs) == [
        (2, "label (column 'label') is NaN or infinite"),
        (3, "label (column 'label') is NaN or infinite"),
        (5, "importance weight (column 'weight') is NaN or infinite"),
        (6, "importance weight (column 'weight') is NaN or infinite"),
        (7, "a feature value is infinite"),
        (8, "-q interaction value (product of two feature values) overflows the double range"),
    ]
    b = concat_batches(bs)
    assert b.lines.tolist() == [1, 4]
    assert np.isnan(b.labels[1]) and b.labels[0] == 1.0 and b.weights.tolist() == [1.0, 1.0]
    assert b.offsets.tolist() == [0, 0, 2] and np.isfinite(b.values).all()  # NaN/null dropped
    with pytest.raises(InputError, match=r"nf.parquet:2: label \(column 'label'\) is NaN"):
        _read(p, strict=True)
    # wide and map columns: inf is a bad row, NaN / null a dropped value
    t = pa.table({"label": [1.0, 1.0, 1.0], "x": [1.0, -inf, nan],
                  "y": pa.array([None, 2, 3], pa.int32())})
    pq.write_table(t, p)
    bs = _read(p, constant=False)
    assert _errors(bs) == [(2, "a feature value is infinite")]
    assert concat_batches(bs).lines.tolist() == [1, 3]
    m = pa.array([[("a", 1.0), ("b", None), ("c", nan)], [("a", inf)]],
                 pa.map_(pa.string(), pa.float64()))
    pq.write_table(pa.table({"label": [1.0, 1.0], "m": m}), p)
    bs = _read(p, constant=False)
    assert _errors(bs) == [(2, "a feature value is infinite")] and bs[0].values.tolist() == [1.0]


def test_bad_index_lists_are_bad_rows_not_a_failed_file(tmp_path):
    """A null or negative index, or 'indices'/'values' lists of different lengths, skip that
    row (they stopped the whole file before; the length message named a 0-based row)."""
    t = pa.table({"label": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                  "indices": pa.array([[1], [None, 2], [-3], [4, 5], None, [6]], pa.list_(pa.int64())),
                  "values": pa.array([[1.0], [1.0, 1.0], [1.0], [4.0], [1.0], [6.0]]),
                  "names": pa.array([["a"], ["b", "c"], ["d"], ["e", "f"], None, ["g"]])})
    p = tmp_path / "idx.parquet"
    pq.write_table(t, p)
    for kw in ({}, {"keep_names": True}):
        bs = _read(p, constant=False, **kw)
        assert [ln for ln, _ in _errors(bs)] == [2, 3, 4, 5]
        assert "null index" in _errors(bs)[0][1] and "negative index" in _errors(bs)[1][1]
        assert "different lengths" in _errors(bs)[2][1]
        b = concat_batches(bs)
        assert b.lines.tolist() == [1, 6] and b.indices.tolist() == [1, 6]
    assert [bs[0].feature_name(k) for k in range(bs[0].nnz)] == ["a", "g"]
    with pytest.raises(InputError, match=r"idx.parquet:2: .*null index"):
        _read(p, strict=True)


def test_null_string_in_namespace_list_is_no_feature(tmp_path):
    pq.write_table(pa.table({"label": [1.0], "ns": pa.array([["x", None]])}), tmp_path / "n.parquet")
    from streamlearn.io.hashing import feature_hash
    b = _read(tmp_path / "n.parquet", constant=False)[0]
    assert b.indices.tolist() == [feature_hash("x", "ns")]


def test_non_ascii_namespace_column_letter_is_its_first_utf8_byte(tmp_path):
    """-q pairs name namespaces by their first byte; the text reader uses the first UTF-8 byte
    of `|éa`, so the Parquet column 'éa' must too (it used the code point 0xE9)."""
    pq.write_table(pa.table({"label": [1.0], "éa": pa.array([["x"]]), "b": pa.array([["y"]])}),
                   tmp_path / "u.parquet")
    (tmp_path / "u.vw").write_text("1 |éa x |b y\n")
    q = (bytes([0xC3, ord("b")]),)
    _same(_read(tmp_path / "u.parquet", quadratic=q), _read(tmp_path / "u.vw", quadratic=q))
    assert _read(tmp_path / "u.parquet", quadratic=q)[0].nnz == 4  # x, y, constant, x*y


def test_quadratic_room_for_later_rows(tmp_path):
    """-q products of an early row must not take the room kept for the linear features of
    the later rows (assemble_rows wrote past its buffers, then failed with a numba
    ValueError). Found by fuzzing."""
    a = [[f"f{j}" for j in range(8)]] + [[]] * 20  # row 1: 36 products, no growth
    b = [[]] + [[f"g{i}_{j}" for j in range(5)] for i in range(20)]  # then linear only
    pq.write_table(pa.table({"label": [1.0] * 21, "a": pa.array(a, pa.list_(pa.string())),
                             "b": pa.array(b, pa.list_(pa.string()))}), tmp_path / "q.parquet")
    (tmp_path / "q.vw").write_text("".join(f"1 |a {' '.join(x)} |b {' '.join(y)}\n"
                                           for x, y in zip(a, b)))
    for q in [("aa",), ("aa", "bc")]:
        _same(_read(tmp_path / "q.parquet", quadratic=q), _read(tmp_path / "q.vw", quadratic=q))


def test_integers_beyond_2_53_round_instead_of_failing_the_file(tmp_path):
    t = pa.table({"label": pa.array([2**64 - 1, 1], pa.uint64()),
                  "x": pa.array([2**62 + 1, None], pa.int64())})
    pq.write_table(t, tmp_path / "i.parquet")
    b = _read(tmp_path / "i.parquet", constant=False)[0]
    assert b.labels.tolist() == [float(2**64 - 1), 1.0] and b.values.tolist() == [float(2**62)]


def test_duplicate_column_names_are_a_schema_error(tmp_path):
    t = pa.Table.from_arrays([pa.array([1.0]), pa.array([2.0]), pa.array([3.0])],
                             names=["label", "x", "x"])
    pq.write_table(t, tmp_path / "d.parquet")
    with pytest.raises(InputError, match="column 'x' appears more than once"):
        _read(tmp_path / "d.parquet")


def test_not_parquet_and_truncated(tmp_path):
    p = tmp_path / "t.parquet"
    data = (DATA / "pq_sparse.parquet").read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="t.parquet"):
        _read(p, fmt="parquet")


def test_cli_train_on_parquet_and_error_exit(invoke_cli):
    r = invoke_cli("train", DATA / "pq_wide.parquet", "--label_column", "y", "--quiet")
    assert r.exit_code == 0, r.output
    r = invoke_cli("train", DATA / "pq_wide.parquet", "--quiet")
    assert r.exit_code == 1
    assert "label column 'label'" in r.output and len(r.output.strip().splitlines()) == 1


# --- prefetch -------------------------------------------------------------------------------

def _threads():
    return {t for t in threading.enumerate() if t.name == "streamlearn-reader"}


def test_prefetch_preserves_order():
    assert list(prefetch(iter(range(1000)), depth=3)) == list(range(1000))
    assert not _threads()


def test_prefetch_propagates_reader_error_and_cleans_up():
    def gen():
        yield 1
        yield 2
        raise InputError("f.vw:3: non-numeric label")

    got = []
    with pytest.raises(InputError, match="f.vw:3"):
        for x in prefetch(gen(), depth=1):
            got.append(x)
    assert got == [1, 2]
    time.sleep(0.05)
    assert not _threads()


def test_prefetch_close_stops_producer_early():
    produced = []
    closed = []

    def gen():
        try:
            for i in range(10**6):
                produced.append(i)
                yield i
        finally:
            closed.append(True)

    pf = Prefetcher(gen(), depth=2)
    assert next(pf) == 0
    pf.close()
    assert not pf.alive
    assert closed == [True]
    assert len(produced) < 100


def test_prefetch_shrink_reads_less_ahead_from_then_on():
    """Prefetcher.shrink: what is queued stays, in order; the producer puts no more until the queue is
    below the new depth (the engine's start-up read-ahead, deeper until dask is imported)."""
    pf = Prefetcher(iter(range(50)), depth=4)
    deadline = time.monotonic() + 5
    while pf._q.qsize() < 4 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert pf._q.qsize() == 4
    pf.shrink(1)
    assert [next(pf) for _ in range(3)] == [0, 1, 2]
    time.sleep(0.02)
    assert pf._q.qsize() == 1  # (3 was queued before the shrink; the producer holds 4 back)
    assert next(pf) == 3
    deadline = time.monotonic() + 5
    while pf._q.qsize() < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.02)
    assert pf._q.qsize() == 1
    assert list(pf) == list(range(4, 50))


def test_prefetch_generator_closed_by_consumer():
    g = prefetch(iter(range(100)), depth=2)
    assert next(g) == 0
    g.close()
    gc.collect()
    time.sleep(0.05)
    assert not _threads()


def test_reader_error_surfaces_through_train(tmp_path):
    p = tmp_path / "bad.vw"
    p.write_text("1 | a\nxx | b\n")
    with pytest.raises(InputError, match="bad.vw:2"):
        train(RunConfig(data=[str(p)], strict=True, quiet=True))
    time.sleep(0.05)
    assert not _threads()


def test_parallel_text_parsing_equals_sequential(tmp_path):
    lines = []
    for i in range(3000):
        lines.append(f"{i % 2} 'tag{i} |a x{i}:1 y |b z" if i % 97 else ("bad |a x" if i % 2 else ""))
    p = tmp_path / "l.vw"
    p.write_text("\n".join(lines))
    cfg = ReaderConfig(chunk_bytes=1000, keep_names=True, quadratic=("ab",))
    a = list(read_batches([str(p)], cfg))
    b = list(read_batches([str(p)], replace(cfg, parse_threads=3)))
    assert len(b) > 10
    _same(a, b, names=True)
    assert ([e for x in a for e in x.extra["errors"]] == [e for x in b for e in x.extra["errors"]]
            == [(str(p), 98 + 194 * k, "non-numeric label") for k in range(15)])
    np.testing.assert_array_equal(concat_batches(a).lines, concat_batches(b).lines)
    with pytest.raises(InputError, match=r"l.vw:98: non-numeric label"):
        list(read_batches([str(p)], ReaderConfig(chunk_bytes=1000, strict=True, parse_threads=2)))
    # Parquet by magic goes to the Parquet reader
    _same(list(read_batches([str(DATA / "pq_sparse.parquet")], ReaderConfig(parse_threads=2))),
          _read(DATA / "pq_sparse.parquet"))


def test_parallel_strict_stops_at_the_first_bad_line(tmp_path):
    """The strict error of a parsed chunk was caught as if the stream were damaged: the next
    pending chunks were still delivered and the error named a later bad line. Found by
    fuzzing (tests/test_fuzz.py)."""
    p = tmp_path / "b.vw"
    p.write_text("".join(f"1 |a x\nbad{i} |a x\n" for i in range(50)))
    got = []
    with pytest.raises(InputError) as e:
        for b in read_batches([str(p)], ReaderConfig(chunk_bytes=8, strict=True, parse_threads=2)):
            got.append(b)
    assert str(e.value) == f"{p}:2: non-numeric label"
    assert [ln for b in got for ln in b.lines.tolist()] == [1]


def test_only_the_cli_tunes_malloc(monkeypatch, tmp_path, invoke_cli):
    """The CLI owns its process and tunes glibc's malloc; the Python API leaves the host
    program's malloc alone."""
    from streamlearn.api import RunConfig, train
    from streamlearn import memory

    calls = []
    monkeypatch.setattr(memory, "bound_malloc", lambda: calls.append(1) or True)
    data = tmp_path / "d.vw"
    data.write_text("1 |a x\n-1 |a y\n" * 20)
    train(RunConfig(data=[str(data)]))
    assert calls == []
    res = invoke_cli("train", data, "--quiet")
    assert res.exit_code == 0, res.output
    assert calls == [1]


def test_bound_malloc_is_idempotent():
    from streamlearn.memory import bound_malloc

    first = bound_malloc()
    assert bound_malloc() is first


_POOL_PROBE = ("import os, sys; sys.path.insert(0, sys.argv[1])\n"
               "if sys.argv[2] == 'made':\n"
               "    import pyarrow as pa\n"
               "    pa.array([1.0, 2.0])  # the pool is made before the CLI's tuning (else: pyarrow not imported yet)\n"
               "from streamlearn.memory import bound_malloc\n"
               "ok = bound_malloc()\n"
               "import pyarrow as pa\n"
               "print(ok, pa.default_memory_pool().backend_name, os.environ.get('ARROW_DEFAULT_MEMORY_POOL'))\n")


def test_the_cli_tuning_gives_arrow_the_system_allocator_unless_the_user_chose_one():
    """Where bound_malloc tuned glibc's heap, Arrow's buffers come from it too (the system pool,
    whether pyarrow made its pool first or is imported after), and child processes inherit the choice; a user's
    ARROW_DEFAULT_MEMORY_POOL is kept."""
    from pathlib import Path

    ROOT = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    bundled = subprocess.run([sys.executable, "-c", "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"],
                             capture_output=True, text=True, env=env, check=True).stdout.strip()
    for when in ("made", "not yet imported"):
        ok, got, var = subprocess.run([sys.executable, "-c", _POOL_PROBE, str(ROOT), when], capture_output=True,
                                      text=True, env=env, check=True).stdout.split()
        if ok != "True":
            pytest.skip("not glibc: bound_malloc tunes nothing and leaves Arrow's pool alone")
        assert (got, var) == ("system", "system"), when
    if bundled == "system":
        pytest.skip("this pyarrow has no bundled allocator to keep")
    ok, got, var = subprocess.run([sys.executable, "-c", _POOL_PROBE, str(ROOT), "made"], capture_output=True,
                                  text=True, env={**env, "ARROW_DEFAULT_MEMORY_POOL": bundled}, check=True).stdout.split()
    assert (got, var) == (bundled, bundled)


def test_an_open_regular_file_is_read_by_path_and_anything_else_through_the_object(tmp_path):
    """pyarrow reads a regular file with its own I/O (half the page faults of reading through
    the Python object); a pipe, or an object whose name is another file, is not taken by name."""
    import os

    from streamlearn.io.parquet import _same_regular_file

    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    a.write_bytes(b"PAR1xxxxPAR1")
    b.write_bytes(b"PAR1xxxxPAR1")
    with open(a, "rb") as f:
        assert _same_regular_file(f, str(a))
        assert not _same_regular_file(f, str(b))
        assert not _same_regular_file(f, str(tmp_path / "missing"))
    r, w = os.pipe()
    try:
        with os.fdopen(r, "rb") as f:
            assert not _same_regular_file(f, "/dev/stdin")
    finally:
        os.close(w)


def test_bounded_trims_the_heap_every_n_batches_and_passes_batches_through(monkeypatch):
    from streamlearn import memory

    calls = []
    monkeypatch.setattr(memory, "trim_heap", lambda: calls.append(1))
    items = [object() for _ in range(100)]
    assert list(memory.bounded(iter(items), every=32)) == items
    assert len(calls) == 3  # after batches 32, 64 and 96


def test_trim_heap_returns_freed_small_blocks(tmp_path):
    """glibc keeps freed small blocks inside its arenas; ``trim_heap`` hands their pages
    back (checked in a child, so this process's heap does not matter)."""
    import ctypes.util
    import subprocess
    import sys

    if not ctypes.util.find_library("c") or sys.platform != "linux":
        pytest.skip("glibc only")
    code = (
        "import ctypes\n"
        "from streamlearn.memory import trim_heap\n"
        "def rss():\n"
        "    return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])\n"
        "libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p\n"
        "libc.free.argtypes = [ctypes.c_void_p]\n"
        "libc.mallopt(-3, 1 << 20)\n"  # as bound_malloc: blocks < 1 MiB come from the heap
        "ps = [libc.malloc(16000) for _ in range(4000)]\n"
        "for p in ps: ctypes.memset(p, 1, 16000)\n"
        "keep = ps[-1]\n"  # the last block pins the heap's top: nothing can be trimmed from the end
        "for p in ps[:-1]: libc.free(p)\n"
        "before = rss(); trim_heap(); after = rss()\n"
        "print(before - after)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(DATA.parents[1]), check=True).stdout.strip()
    assert int(out) > 40_000  # kB: most of the ~64 MB freed in the middle of the heap


def test_cli_import_stays_light():
    """``streamlearn --help`` must not pay for numba or pyarrow (they load on first use)."""
    import subprocess
    import sys

    code = ("import sys, streamlearn.cli; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'pyarrow'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(DATA.parents[1]), check=True).stdout.strip()
    assert out == "[]"


def test_validity_from_the_bitmap_equals_is_valid():
    """parquet._valid reads the validity bitmap (no pyarrow.compute import): the same as
    Array.is_valid() on sliced arrays of every column kind, nulls anywhere in a byte."""
    from streamlearn.io.parquet import _valid
    r = np.random.default_rng(1)
    for t in (pa.float64(), pa.string(), pa.list_(pa.int64()), pa.map_(pa.string(), pa.float64()), pa.null()):
        for n in (0, 1, 9, 40):
            m = r.random(n) < 0.4
            one = {pa.types.is_map(t): [("a", 1.0)], pa.types.is_list(t): [1], pa.types.is_string(t): "a",
                   pa.types.is_floating(t): 1.0}.get(True)
            a = pa.array([None if x else one for x in m], t)
            for off in range(min(n, 10)):
                for ln in (0, 1, n - off):
                    sl = a.slice(off, ln)
                    ref = sl.is_valid().to_numpy(zero_copy_only=False)
                    got = _valid(sl)
                    assert got.dtype == bool and got.tolist() == ref.tolist(), (t, n, off, ln)


def test_numeric_columns_are_read_without_pandas_and_equal_to_numpy():
    """parquet._numpy views the data buffer (no pandas import: Array.to_numpy loads pandas, ~0.65 CPU-s
    in every process that reads Parquet, every Dask worker): the same values and dtype as
    Array.to_numpy on sliced arrays of each numeric type, with and without nulls; and a child process
    that trains on a Parquet file has not imported pandas."""
    import subprocess
    import sys

    from streamlearn.io.parquet import _numpy
    r = np.random.default_rng(2)
    for t in (pa.float64(), pa.float32(), pa.int8(), pa.int32(), pa.int64(), pa.uint32(), pa.uint64()):
        for nulls in (False, True):
            vals = [None if nulls and r.random() < 0.3 else int(r.integers(0, 100)) for _ in range(13)]
            a = pa.array(vals, t)
            for off, ln in ((0, 13), (3, 7), (5, 0), (12, 1)):
                sl = a.slice(off, ln)
                ref, got = sl.to_numpy(zero_copy_only=False), _numpy(sl)
                assert got.dtype == ref.dtype and np.array_equal(got, ref, equal_nan=True), (t, nulls, off, ln)
    code = ("import sys; from streamlearn.api import RunConfig, train; "
            f"train(RunConfig(data=[{str(DATA / 'pq_sparse.parquet')!r}], quiet=True)); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(DATA.parents[1]), check=True).stdout.strip()
    assert out == "False"


def test_parquet_from_a_pipe_is_copied_to_a_temporary_file_and_read_as_the_file(tmp_path, run_cli):
    """Parquet needs random access (its footer is at the end): a pipe is copied to $TMPDIR,
    read with bounded memory like the file, and the copy is removed afterwards."""
    import json

    spool = tmp_path / "spool"
    spool.mkdir()
    src = DATA / "pq_sparse.parquet"
    runs = []
    for args, stdin in (([str(src)], None), (["-"], src.read_bytes())):
        m = tmp_path / f"m{len(runs)}.slm"
        r = run_cli("train", *args, "-f", m, "--metrics", tmp_path / "x.json", "--quiet",
                    stdin=stdin, env={"TMPDIR": spool})
        assert r.returncode == 0, r.stderr.decode()
        runs.append((json.loads((tmp_path / "x.json").read_text())["average_loss"], m.read_bytes()))
    assert runs[0] == runs[1]
    assert list(spool.iterdir()) == []


def test_parquet_spool_failure_names_the_stream_and_leaves_nothing(tmp_path, monkeypatch):
    import errno
    import io
    import tempfile

    from streamlearn.io import parquet as P

    made = []

    class Full:
        def __init__(self, *a, **k):
            self.name = str(tmp_path / "spool.parquet")
            self.closed = False
            made.append(self)

        def write(self, b):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

        def close(self):
            self.closed = True

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", Full)
    class Pipe(io.RawIOBase):  # not seekable, like stdin from a pipe
        def __init__(self, data):
            self._b = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self._b.readinto(b)

    stream = io.BufferedReader(Pipe((DATA / "pq_sparse.parquet").read_bytes()))
    assert not stream.seekable()
    with pytest.raises(InputError, match=r"^<stdin>: cannot copy the Parquet stream to a "
                                         r"temporary file in .*No space left on device; set TMPDIR"):
        list(P.read_parquet_file(stream, ReaderConfig(), name="<stdin>"))
    assert made and all(f.closed for f in made)


def test_gzipped_parquet_is_read_as_parquet_from_a_file_and_from_stdin(tmp_path, run_cli):
    """x.parquet.gz is sniffed by its decompressed magic (it used to be parsed as text: every
    line malformed); from a file or stdin it gives the file's batches, and a truncated one
    gives one line naming the stream."""
    import gzip

    src = DATA / "pq_sparse.parquet"
    gz = tmp_path / "d.parquet.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    _same(_read(src), _read(gz))
    cmd = ["train", "--quiet", "-p", "-"]
    want = run_cli(*cmd, src)
    for args, stdin in (([gz], None), (["-"], gz.read_bytes())):
        got = run_cli(*cmd, *args, stdin=stdin)
        assert got.returncode == 0, got.stderr.decode()
        assert got.stdout == want.stdout and want.stdout
    bad = run_cli(*cmd[:-3], "-", stdin=gz.read_bytes()[:-20])
    assert bad.returncode == 1
    assert bad.stderr.decode().strip().splitlines()[-1] == "streamlearn: error: <stdin>: gzip stream is truncated"
