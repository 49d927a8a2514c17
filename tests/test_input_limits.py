"""Bounded memory per line and input values the readers refuse (issue 16, defects 6 and 9):
the cap on features per example (``--max_example_features``, interactions included, checked
before they are generated), the cap on the line length (``--max_line_bytes``: a longer line or
a stream with no newline is an input error), negative importance weights and LIBSVM indices
past the 32-bit hash (malformed lines), on the C and the numba reader alike and on Parquet.

Caps are small here (set through the option): no test allocates more than a few MB."""
from __future__ import annotations

import gzip
import io
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fuzz_oracle as fo
from streamlearn.errors import InputError
from streamlearn.io import ReaderConfig, read_batches
from streamlearn.io.source import LineTooLong, iter_chunks, parse_text, text_batches

BACKENDS = [pytest.param(True, id="c"), pytest.param(False, id="numba")]


def _features(n, ns):
    return " ".join(f"{ns}{i}" for i in range(n))


def _parse(data: bytes, fmt: str, use_c: bool, **cfg):
    with fo.kernel_backend(use_c):
        return parse_text(data, ReaderConfig(fmt=fmt, **cfg), "f.txt", fmt)


# ------------------------------------------------------------------------ features per example

@pytest.mark.parametrize("use_c", BACKENDS)
def test_a_quadratic_bomb_line_is_malformed_before_its_products_are_made(use_c):
    """40 x 40 features under -q ab: 1600 products + 81 linear and constant; with a cap of
    1000 the line is malformed (named, reason says the cap), the lines around it are kept."""
    bomb = f"1 |a {_features(40, 'a')} |b {_features(40, 'b')}"
    data = f"1 |a x |b y\n{bomb}\n-1 |a z\n".encode()
    b = _parse(data, "vw", use_c, quadratic=("ab",), max_example_features=1000)
    assert b.lines.tolist() == [1, 3]
    assert b.extra["errors"] == [("f.txt", 2, "more than 1000 features with its interactions "
                                  "(--max_example_features)")]
    # the same line under a cap that holds it: every feature is there
    b = _parse(data, "vw", use_c, quadratic=("ab",), max_example_features=1681)
    assert b.lines.tolist() == [1, 2, 3] and np.diff(b.offsets).tolist() == [4, 1681, 2]
    b = _parse(data, "vw", use_c, quadratic=("ab",), max_example_features=1680)
    assert b.lines.tolist() == [1, 3]


@pytest.mark.parametrize("use_c", BACKENDS)
def test_linear_features_count_against_the_cap_too(use_c):
    data = b"1 | a b c\n1 | a b c d\n"
    b = _parse(data, "vw", use_c, max_example_features=4)  # 3 + constant fits, 4 + constant not
    assert b.lines.tolist() == [1] and [e[1] for e in b.extra["errors"]] == [2]
    b = _parse(data, "vw", use_c, max_example_features=4, constant=False)
    assert b.lines.tolist() == [1, 2]
    b = _parse(b"2 1:1 2:1 3:1\n2 1:1 2:1\n", "libsvm", use_c, max_example_features=3)
    assert b.lines.tolist() == [2] and [e[1] for e in b.extra["errors"]] == [1]


def test_a_huge_interaction_count_saturates_instead_of_overflowing():
    """--interactions of order 40 over 1000 features (C(1039, 40) ~ 1e70 products, far past
    int64): refused at once, on both backends, not wrapped into a small count."""
    line = f"1 |a {_features(1000, 'f')}\n".encode()
    for use_c in (True, False):
        b = _parse(line, "vw", use_c, interactions=("a" * 40,))
        assert b.n == 0 and b.extra["errors"][0][1] == 1, use_c


@pytest.mark.parametrize("seed", range(4))
def test_the_cap_matches_the_oracle_count(seed):
    """Random lines and -q pairs against the pure-Python oracle (tests/fuzz_oracle.py): a line
    is malformed for the cap exactly when the oracle gives it more features than the cap, and a
    kept line has the oracle's number of features; C and numba agree."""
    r = random.Random(seed)
    for case in range(15):
        fmt = r.choice(["vw", "libsvm"])
        data = fo.join_lines(r, fo.gen_lines(r, fmt, r.randint(1, 40)))
        cfg = fo.random_config(r, fmt)
        pairs, constant = cfg["pairs"], cfg["constant"]
        lines = fo.oracle_text(data, fmt, pairs, constant)
        counts = sorted(len(x.features) for x in lines if x.good)
        for cap in {1, r.randint(1, 30), max(1, counts[len(counts) // 2]) if counts else 5}:
            want_bad = {x.line for x in lines if not x.good or len(x.features) > cap}
            want_n = {x.line: len(x.features) for x in lines if x.good and len(x.features) <= cap}
            got = []
            for use_c in (True, False):
                b = _parse(data, fmt, use_c, quadratic=pairs, constant=constant,
                           max_example_features=cap)
                assert {e[1] for e in b.extra["errors"]} == want_bad, (seed, case, cap, use_c)
                assert dict(zip(b.lines.tolist(), np.diff(b.offsets).tolist())) == want_n
                got.append((b.indices.tobytes(), b.values.tobytes()))
            assert got[0] == got[1]


@pytest.mark.parametrize("use_c", BACKENDS)
def test_parquet_rows_past_the_cap_are_bad_rows(tmp_path, use_c):
    t = pa.table({"label": [1.0, -1.0, 1.0],
                  "a": [["x"], [f"x{i}" for i in range(30)], ["y"]],
                  "b": [["u"], [f"u{i}" for i in range(30)], ["v"]]})
    path = tmp_path / "t.parquet"
    pq.write_table(t, path)
    with fo.kernel_backend(use_c):
        bs = list(read_batches([str(path)], ReaderConfig(quadratic=("ab",), max_example_features=500)))
        assert [ln for b in bs for ln in b.lines.tolist()] == [1, 3]
        errs = [e for b in bs for e in b.extra["errors"]]
        assert errs == [(str(path), 2, "more than 500 features with its interactions "
                         "(--max_example_features)")]
        bs = list(read_batches([str(path)], ReaderConfig(quadratic=("ab",), max_example_features=961)))
        assert [np.diff(b.offsets).tolist() for b in bs] == [[4, 961, 4]]


def test_cli_reports_the_bomb_line_and_learns_the_others(tmp_path, run_cli, cli_ok):
    bomb = f"1 |a {_features(40, 'a')} |b {_features(40, 'b')}"
    f = tmp_path / "q.vw"
    f.write_text(f"1 |a x |b y\n{bomb}\n-1 |a z\n")
    for env in ({}, {"STREAMLEARN_NO_C": "1"}):
        r = cli_ok(run_cli("train", f, "-q", "ab", "--max_example_features", "1000", "-p",
                           tmp_path / "p.txt", text=True, env=env))
        assert (f"warning: {f}:2: more than 1000 features with its interactions "
                "(--max_example_features); line skipped") in r.stderr
        assert len((tmp_path / "p.txt").read_text().splitlines()) == 2
        r = run_cli("train", f, "-q", "ab", "--max_example_features", "1000", "--strict", text=True, env=env)
        assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == (
            f"streamlearn: error: {f}:2: more than 1000 features with its interactions "
            "(--max_example_features)")
    for bad in ("0", "-5", "x", str(2**41)):
        r = run_cli("train", f, "--max_example_features", bad, text=True)
        assert r.returncode == 2 and "Traceback" not in r.stderr, bad


# ------------------------------------------------------------------------------ line length

class _Zeros(io.RawIOBase):
    """An endless stream of NUL bytes (``/dev/zero``) that counts what was read."""

    def __init__(self):
        self.read_bytes = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = len(b)
        b[:n] = bytes(n)
        self.read_bytes += n
        return n


def test_a_stream_without_newline_stops_after_the_cap():
    """/dev/zero: reading stops once the line passes the cap (a few times the cap read at
    most), with LineTooLong; it never grows without limit."""
    z = _Zeros()
    with pytest.raises(LineTooLong):
        for _ in iter_chunks(z, "zero", 4096, max_line_bytes=100_000):
            pass
    assert 100_000 < z.read_bytes <= 300_000
    z = _Zeros()
    with pytest.raises(InputError, match=r"^zero:1: line longer than 100000 bytes \(--max_line_bytes"):
        list(text_batches(z, "zero", ReaderConfig(max_line_bytes=100_000), "auto"))


@pytest.mark.parametrize("chunk", [16, 64, 1 << 20])
def test_a_long_line_is_an_input_error_naming_it_after_the_lines_before(chunk):
    """Whatever the chunk size (the line in one chunk, or growing across many), the lines
    before the long one are parsed and the error names its line; a line of exactly the cap
    is fine, and so is a last line without newline."""
    good = b"1 | a\n-1 | b\n"
    for limit in (10, 11, 12):
        long = b"1 | " + b"c" * (limit - 3)  # limit + 1 bytes
        data = good + long + b"\n1 | d\n"
        got = []
        with pytest.raises(InputError, match=rf"^f:3: line longer than {limit} bytes"):
            for b in text_batches(io.BytesIO(data), "f", ReaderConfig(chunk_bytes=chunk, max_line_bytes=limit),
                                  "vw"):
                got.extend(b.lines.tolist())
        assert got == [1, 2]
        ok = good + long[:-1] + b"\n1 | d"  # exactly the cap, no final newline
        got = [ln for b in text_batches(io.BytesIO(ok), "f", ReaderConfig(chunk_bytes=chunk,
                                                                         max_line_bytes=limit), "vw")
               for ln in b.lines.tolist()]
        assert got == [1, 2, 3, 4]


def test_cli_gzip_bomb_and_long_line(tmp_path, run_cli):
    """A gzip of 3 MB of zeros (3 KB on disk) and a file with a long line: exit 1, one line
    naming the file and line, predictions of the lines before it kept; -f not written."""
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(bytes(3 << 20)))
    r = run_cli("train", bomb, "--max_line_bytes", "100000", "-f", tmp_path / "m.slm", text=True)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (f"streamlearn: error: {bomb}:1: line longer than 100000 bytes "
                                "(--max_line_bytes; is this a text file?)")
    assert not (tmp_path / "m.slm").exists()
    f = tmp_path / "l.vw"
    f.write_text("1 | a\n-1 | b\n1 | " + "x" * 200 + "\n1 | c\n")
    r = run_cli("train", f, "--max_line_bytes", "100", "-p", tmp_path / "p.txt", text=True)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == (
        f"streamlearn: error: {f}:3: line longer than 100 bytes (--max_line_bytes; is this a text file?)")
    assert len((tmp_path / "p.txt").read_text().splitlines()) == 2
    for bad in ("0", "-1", "1e3"):
        r = run_cli("train", f, "--max_line_bytes", bad, text=True)
        assert r.returncode == 2 and "Traceback" not in r.stderr, bad


# ------------------------------------------------------------- importance weights, LIBSVM index

@pytest.mark.parametrize("use_c", BACKENDS)
def test_negative_importance_weight_is_a_malformed_line(use_c):
    """VW refuses a negative importance weight ("importance weights must be non-negative. Use
    0 to hold an example out of training") and still counts it in its weighted sums; here the
    line is malformed. 0 and -0 are fine (held out)."""
    data = b"1 -2 | a\n1 0 | b\n1 -0 | c\n-1 -0.5 'tag| d\n1 2 | e\n1 -1e-400 | f\n"
    b = _parse(data, "vw", use_c)
    assert b.lines.tolist() == [2, 3, 5, 6]
    assert [e[1:] for e in b.extra["errors"]] == [
        (1, "negative importance weight (use 0 to hold an example out of training, as VW says)"),
        (4, "negative importance weight (use 0 to hold an example out of training, as VW says)")]


def test_negative_importance_weight_in_parquet_is_a_bad_row(tmp_path):
    t = pa.table({"label": [1.0, 1.0, -1.0], "weight": [-1.0, None, 0.0], "indices": [[1], [2], [3]],
                  "values": [[1.0], [1.0], [1.0]]})
    path = tmp_path / "w.parquet"
    pq.write_table(t, path)
    bs = list(read_batches([str(path)]))
    assert [ln for b in bs for ln in b.lines.tolist()] == [2, 3]
    assert [e[1] for b in bs for e in b.extra["errors"]] == [1]
    assert "negative importance weight" in bs[0].extra["errors"][0][2]


@pytest.mark.parametrize("use_c", BACKENDS)
def test_libsvm_index_that_overflows_is_a_malformed_line(use_c):
    """LIBSVM's own reader refuses an index that overflows its integer (strtol's ERANGE past
    2**63 - 1); it was accepted here, wrapped around (99999999999999999999 gave hash
    1661992959). Below that the hash is the index mod 2**32, VW's rule for an all-digit name
    (4294967297 -> 1), leading zeros included."""
    data = (b"1 99999999999999999999:1\n1 9223372036854775808:1\n"
            b"1 9223372036854775807:1 4294967297:2 00000000000000000000007:3 09223372036854775807:4\n"
            b"1 3:1 184467440737095516161:1\n1 18446744073709551616:1\n1 000000000000000000009223372036854775808:1\n")
    b = _parse(data, "libsvm", use_c, constant=False)
    assert b.lines.tolist() == [3]
    assert b.indices.tolist() == [(2**63 - 1) % 2**32, 1, 7, (2**63 - 1) % 2**32]
    reason = "LIBSVM feature index overflows (beyond 2**63 - 1, where LIBSVM's reader stops too)"
    assert b.extra["errors"] == [("f.txt", ln, reason) for ln in (1, 2, 4, 5, 6)]
