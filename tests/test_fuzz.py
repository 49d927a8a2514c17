"""Reader fuzzing (issue 6): property-based tests of the VW text, LIBSVM and Parquet readers
against the pure-Python oracle in ``tests/fuzz_oracle.py``.

Every property: no exception other than :class:`~streamlearn.errors.InputError` (and that one
only under ``strict`` or for a rejected Parquet schema), every malformed line skipped and
reported as ``(file, line, reason)`` with the oracle's reason, ``strict`` stopping at the first
one with ``FILE:LINE: reason``, and every good line parsed exactly as the oracle says (label,
importance, tag, hashes and values in order, names, constant, ``-q`` pairs).

The hypothesis settings are reproducible (derandomized, no example database) and small
(the whole file runs in well under a minute); set ``STREAMLEARN_FUZZ_EXAMPLES`` for a longer
local run, and see ``benchmarks/fuzz_readers.py`` for the 100,000-line run.
"""
from __future__ import annotations

import os
import random
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_oracle as fo  # noqa: E402

from streamlearn.api import WARNINGS_PER_REASON  # noqa: E402
from streamlearn.errors import InputError  # noqa: E402
from streamlearn.io import ReaderConfig, read_batches  # noqa: E402

from conftest import ROOT  # noqa: E402

N = int(os.environ.get("STREAMLEARN_FUZZ_EXAMPLES", "0"))


def fuzz(n):
    """Reproducible hypothesis settings with ``n`` examples (or the env override)."""
    return settings(max_examples=N or n, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def ok(res: fo.CaseResult):
    assert not res.crashes, res.crashes[0]
    assert not res.mismatches, "\n".join(res.mismatches[:10])


# ------------------------------------------------------------------------------ the oracle

def test_oracle_agrees_with_the_documented_examples():
    """The oracle itself, on the grammar examples of the module docstrings and tests."""
    (a,) = fo.oracle_text(b"1 2 'q |ns:0.5 p:4 3\n", "vw", constant=False)
    assert (a.label, a.weight, a.tag) == (1.0, 2.0, b"q")
    assert [(f.h, f.v) for f in a.features] == [
        (fo.hashstring(b"p", fo.hashstring(b"ns", 0)), 2.0),
        (fo.hashstring(b"3", fo.hashstring(b"ns", 0)), 0.5)]
    (b,) = fo.oracle_text(b"1| g", "vw")
    assert b.tag == b"1" and b.label != b.label  # touching the bar: the tag, no label
    assert [r.error for r in fo.oracle_text(
        b"abc |a\n1 |a x:\n1 |a x:nan\n1 2 3 4 |a\n1 |a:1e300 x:1e10\nnan |a\n", "vw")] == [
        "ERR_LABEL", "ERR_FEATURE_VALUE", "ERR_VALUE_NONFINITE", "ERR_LABEL_TOKENS",
        "ERR_VALUE_OVERFLOW", "ERR_LABEL_NONFINITE"]
    assert [r.error for r in fo.oracle_text(
        b"1 5\n1 a:1\n1 qid:3 2:1\n# c\ninf 1:1\n", "libsvm")] == [
        "ERR_NO_COLON", "ERR_INDEX", None, "ERR_LABEL_NONFINITE"]
    assert fo.hashstring(b" 12 ", 3) == 15 and fo.hashstring(b"", 77) == 77
    # indices printed by `vw --audit -b 18` (VW 9.11.9; see tests/test_hashing.py)
    hx, hz = fo.hashstring(b"x", fo.hashstring(b"a", 0)), fo.hashstring(b"z", fo.hashstring(b"b", 0))
    m18 = (1 << 18) - 1
    assert (hx & m18, fo.CONSTANT_HASH & m18, fo.quadratic(hx, hz) & m18) == (55432, 116060, 80151)
    assert fo.hashstring(b"", fo.hashstring(b"a", 0)) & m18 == 92594


# ------------------------------------------------------------------------------ VW / LIBSVM

@fuzz(40)
@given(seed=st.integers(0, 2**32 - 1), fmt=st.sampled_from(["vw", "libsvm"]))
def test_random_and_mutated_files(seed, fmt):
    """Random lines (bad numbers, nan/inf, 1e400, stray | and :, invalid UTF-8, NUL, CRLF,
    no final newline) read in random chunk sizes with random -q / constant / names."""
    r = random.Random(seed)
    lines = fo.gen_lines(r, fmt, r.randint(0, 40), p_mutate=0.35)
    data = fo.join_lines(r, lines)
    ok(fo.check_text(data, fmt, **fo.random_config(r, fmt)))


_ALPHABET = st.sampled_from([b"|", b":", b" ", b"\t", b"\r", b"\x00", b"\xff", b"'", b"#", b".",
                             b"-", b"e", b"1", b"0", b"9", b"a", b"b", b"n", b"i", b"f",
                             b"\x0b", b"\xc3", b"q", b"d"])


@fuzz(150)
@given(lines=st.lists(st.lists(_ALPHABET, max_size=25).map(b"".join), max_size=6),
       fmt=st.sampled_from(["vw", "libsvm", "auto"]), crlf=st.booleans(), final_nl=st.booleans(),
       pairs=st.sampled_from([(), (b"aa",), (b"ab", b"  ")]))
def test_lines_over_the_grammar_alphabet(lines, fmt, crlf, final_nl, pairs):
    """Short lines over the bytes that matter to the grammar (shrinks to minimal cases)."""
    data = (b"\r\n" if crlf else b"\n").join(lines) + (b"\n" if final_nl and lines else b"")
    ok(fo.check_text(data, fmt, pairs=pairs if fmt != "libsvm" else (), chunk_bytes=5))


@fuzz(60)
@given(data=st.binary(max_size=400), fmt=st.sampled_from(["vw", "libsvm"]))
def test_arbitrary_bytes(data, fmt):
    ok(fo.check_text(data, fmt, keep_names=True))


@fuzz(150)
@given(x=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10**30, 10**30),
       spelling=st.sampled_from(["repr", "e", "f"]))
def test_numbers_as_label_weight_and_value(x, spelling):
    """Any double (subnormal, huge, nan, inf) as Python spells it, as label, importance,
    namespace weight and feature value."""
    if isinstance(x, float):
        s = {"repr": repr(x), "e": f"{x:.17e}", "f": f"{x:.30f}"}[spelling].encode()
    else:
        s = str(x).encode()
    data = b"\n".join([s + b" |a x", b"1 " + s + b" |a x", b"1 |a:" + s + b" x:3",
                       b"1 |a x:" + s, b"1 |a x:" + s + b" |b y:" + s])
    ok(fo.check_text(data, "vw", pairs=(b"ab",)))
    ok(fo.check_text(s + b" 1:1\n1 2:" + s + b"\n", "libsvm", pairs=(b"  ",)))


# ------------------------------------------------------------------------------ special files

def _case(name):
    r = random.Random(name)
    good = fo.gen_lines(r, "vw", 20, p_mutate=0)
    return {
        "empty": b"",
        "blank_only": b"\n \n\t\r\n\n",
        "no_final_newline": b"1 |a x\n-1 |b y:2",
        "no_final_newline_bad": b"1 |a x\n-1 |b y:nan",
        "crlf": b"\r\n".join(good) + b"\r\n",
        "cr_only": b"1 |a x\r-1 |a y\r",
        "nul_bytes": b"1 |a x\x00y\n\x00\n1 |a \x00\n\x00 |a x\n1 |\x00a x\n",
        "invalid_utf8": b"1 '\xff\xfe |\xc3 \xed\xa0\x80:2 \xc0\xaf\n\xef\xbb\xbf1 |a x\n1 |a \xff:x\n",
        "bom": b"\xef\xbb\xbf1 |a x\n",
        "stray_bars_colons": b"|\n||\n:\n1 :\n1 |:\n1 |a :\n1 |a :: |\n1 |a x:1:2\n1 |a:|b x\n|a:2|b:3 x",
        "huge_exponents": b"1e400 |a x\n1 |a x:1e-400\n1 |a:1e308 x:10\n1e-999 |a x\n"
                          b"1 |a x:1e99999999999999999999\n",
        "long_number": b"1 |a x:0." + b"0" * 100000 + b"1e100001\n1 |a y:" + b"7" * 50000 + b"\n",
    }[name]


@pytest.mark.parametrize("name", ["empty", "blank_only", "no_final_newline",
                                  "no_final_newline_bad", "crlf", "cr_only", "nul_bytes",
                                  "invalid_utf8", "bom", "stray_bars_colons", "huge_exponents",
                                  "long_number"])
@pytest.mark.parametrize("fmt", ["vw", "libsvm"])
def test_special_files(name, fmt, tmp_path):
    data = _case(name)
    p = tmp_path / f"{name}.{fmt}"
    p.write_bytes(data)
    for cb in (1, 13, 1 << 22):
        ok(fo.check_text(data, fmt, keep_names=True, chunk_bytes=cb))
        ok(fo.check_text(data, fmt, chunk_bytes=cb, path=p))  # via read_batches(file)


@pytest.mark.parametrize("fmt", ["vw", "libsvm"])
@pytest.mark.parametrize("bad", [False, True])
def test_one_megabyte_line(fmt, bad):
    line = fo.long_line(fmt, 1 << 20, bad_at_end=bad)
    data = b"1 |a x\n" + line + b"\n-1 |b y\n" if fmt == "vw" else b"1 1:1\n" + line + b"\n-1 2:1\n"
    res = fo.check_text(data, fmt, chunk_bytes=1 << 16, strict=bad)
    ok(res)
    assert (res.good, res.bad) == ((2, 1) if bad else (3, 0))


def test_strict_mode_names_file_and_line(tmp_path):
    p = tmp_path / "s.vw"
    p.write_bytes(b"1 |a x\n\n-1 |a y:inf\n1 |a z\n2 nan |a\n")
    with pytest.raises(InputError) as e:
        list(read_batches([str(p)], ReaderConfig(strict=True, chunk_bytes=3)))
    assert str(e.value) == f"{p}:3: feature value is NaN or infinite (nan/inf, or beyond the double range like 1e400)"
    bs = list(read_batches([str(p)], ReaderConfig(chunk_bytes=3)))
    assert [(ln, why.split(" ")[0]) for b in bs for _, ln, why in b.extra["errors"]] == [
        (3, "feature"), (5, "importance")]


@fuzz(15)
@given(seed=st.integers(0, 2**32 - 1), fmt=st.sampled_from(["vw", "libsvm"]))
def test_parallel_reader_matches_oracle(seed, fmt, tmp_path_factory):
    """The CLI's reader (chunks parsed by worker threads) gives the oracle's lines too, and
    its strict mode stops at the first bad line."""
    r = random.Random(seed)
    data = fo.join_lines(r, fo.gen_lines(r, fmt, 120, p_mutate=0.3))
    p = tmp_path_factory.mktemp("par") / f"f.{fmt}"
    p.write_bytes(data)
    cfg = fo.random_config(r, fmt)
    cfg["chunk_bytes"] = r.choice([50, 300, 4096])
    ok(fo.check_text(data, fmt, path=p, reader="parallel", **cfg))


# ------------------------------------------------------------------------------ Parquet

@fuzz(60)
@given(seed=st.integers(0, 2**32 - 1))
def test_parquet_schema_and_value_mutations(seed, tmp_path_factory):
    """Random tables in the accepted schemas, then wrong column types, missing / renamed /
    duplicated columns, list<string> where list<int> is expected, nulls, NaN, inf, nested
    types: a schema error naming the column, or rows as the oracle reads them."""
    r = random.Random(seed)
    table = fo.gen_parquet_table(r)
    cfg = fo.random_config(r, "vw")
    path = tmp_path_factory.mktemp("pq") / "t.parquet"
    ok(fo.check_parquet(table, path, pairs=cfg["pairs"], constant=cfg["constant"],
                        keep_names=cfg["keep_names"], batch_rows=r.choice([None, 1, 2, 5])))


def test_parquet_not_a_parquet_file(tmp_path):
    """Damaged Parquet bytes: one InputError naming the file, never a traceback."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"label": [1.0, -1.0] * 50, "x": [0.5, 2.0] * 50}), p)
    data = p.read_bytes()
    r = random.Random(3)
    for k in range(40):
        bad = bytearray(data)
        if k < 10:
            bad = bad[: r.randrange(4, len(bad))]
        else:
            for _ in range(r.randint(1, 8)):
                bad[r.randrange(len(bad))] = r.randrange(256)
        q = tmp_path / f"d{k}.parquet"
        q.write_bytes(bytes(bad))
        try:
            list(read_batches([str(q)], ReaderConfig(fmt="parquet")))
        except InputError as e:
            assert str(q) in str(e)


# ------------------------------------------------------------------------------ CLI end to end

_CLI_ENV = {"STREAMLEARN_PARSE_THREADS": "2", "STREAMLEARN_CHUNK_BYTES": "4096"}

@pytest.mark.parametrize("fmt,seed", [("vw", 1), ("libsvm", 2), ("parquet", 3)])
def test_cli_train_on_fuzzed_file(fmt, seed, tmp_path, run_cli):
    """``streamlearn train FILE`` exits 0 with the oracle's number of skipped lines and no
    traceback; with ``--strict`` it exits 1 naming the first bad line."""
    r = random.Random(seed)
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        p = tmp_path / "f.parquet"
        n = 300
        t = pa.table({"label": [r.choice([1.0, -1.0, float("inf"), float("nan"), None])
                                if r.random() < 0.1 else 1.0 for _ in range(n)],
                      "a": pa.array([[r.choice(["x", "y", None]) for _ in range(3)] for _ in range(n)]),
                      "m": pa.array([[("k", r.choice([1.0, float("inf"), float("nan"), 0.0, None]))]
                                     for _ in range(n)], pa.map_(pa.string(), pa.float64()))})
        pq.write_table(t, p, row_group_size=64)
        exp = fo.oracle_parquet(pq.read_table(p))
        first = next(x for x in exp if not x.good)
        first_msg = f"{p}:{first.line}: {first.error}"
    else:
        head = b"1 |a x\n" if fmt == "vw" else b"1 1:1\n"  # so that auto picks `fmt`
        data = head + fo.join_lines(r, fo.gen_lines(r, fmt, 3000, p_mutate=0.2, tame=True))
        p = tmp_path / f"f.{fmt}"
        p.write_bytes(data)
        assert fo.sniff(data) == fmt
        exp = fo.oracle_text(data, "auto")
        first = next(x for x in exp if not x.good)
        first_msg = f"{p}:{first.line}: {fo.reason_text(first.error)}"
    n_bad = sum(not x.good for x in exp)
    assert n_bad > 0 and not any(x.fragile for x in exp)
    run = run_cli("train", p, env=_CLI_ENV, text=True, cwd=ROOT)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    m = re.search(r"^skipped lines = (\d+)$", run.stderr, re.M)
    assert m and int(m.group(1)) == n_bad, run.stderr[-2000:]
    # warnings: the first WARNINGS_PER_REASON of each kind of reason, then one line counting the rest
    kinds = Counter(re.sub(r"[-+]?\d+(\.\d+)?", "N", x.error if fmt == "parquet" else fo.reason_text(x.error))
                    for x in exp if not x.good)
    shown = sum(min(c, WARNINGS_PER_REASON) for c in kinds.values())
    assert len(re.findall(r"^warning: .*; line skipped$", run.stderr, re.M)) == shown
    if shown < n_bad:
        assert f"warning: {n_bad - shown} more skipped lines not shown" in run.stderr
    assert re.search(r"^number of examples = %d$" % sum(x.good for x in exp), run.stderr, re.M), \
        run.stderr[-2000:]
    run = run_cli("train", "--strict", "--quiet", p, env=_CLI_ENV, text=True, cwd=ROOT)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.strip() == f"streamlearn: error: {first_msg}"
