"""Text readers: float parser, VW and LIBSVM grammar, gzip/plain/stdin, chunking, line
numbers, malformed lines, and the VW golden indices (tests/data/io_vw_golden_*.txt, made by
tests/data/make_io_vw_golden.sh with VW 9.11.9; this test needs neither VW nor its tools)."""
import gzip
import io
import math
import random
import re
import sys

import numpy as np
import pytest

from streamlearn.errors import ConfigError, InputError
from streamlearn.io import ReaderConfig, read_batches
from streamlearn.io import source as source_mod
from streamlearn.io._text_kernels import parse_float
from streamlearn.io.hashing import CONSTANT_HASH, feature_hash, quadratic_hash
from streamlearn.io.libsvm import parse_libsvm
from streamlearn.io.vw_text import parse_vw

from conftest import DATA
MASK18 = (1 << 18) - 1


def pf(s):
    a = np.frombuffer(bytearray(s.encode()), np.uint8)
    return parse_float(a, 0, len(a))


def rows(batch):
    """Per example: sorted list of (hash, value)."""
    out = []
    for i in range(batch.n):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        out.append(sorted(zip(batch.indices[lo:hi].tolist(), batch.values[lo:hi].tolist())))
    return out


def collect(paths, cfg):
    bs = list(read_batches(paths, cfg))
    res = dict(rows=[], labels=[], weights=[], lines=[], tags=[], sources=[], errors=[])
    for b in bs:
        res["rows"] += rows(b)
        res["labels"] += [None if math.isnan(x) else x for x in b.labels.tolist()]
        res["weights"] += b.weights.tolist()
        res["lines"] += b.lines.tolist()
        res["tags"] += b.tags()
        res["sources"] += [b.source] * b.n
        res["errors"] += b.extra["errors"]
    return res


# ------------------------------------------------------------------------------ floats

@pytest.mark.parametrize("s", [
    "0", "1", "-1", "+1", "1e-5", ".5", "5.", "-0", "-0.0", "1E+3", "1e3", "2.5e-3",
    "123456789012345678", "1234567890123456789012", "0.011764705882352941",
    "3.141592653589793", "1e22", "1e23", "9007199254740993", "1e308", "1.7976931348623157e308",
    "2.2250738585072014e-308", "4.9e-324", "1e-400", "1e400", "-1e400", "0000.000100",
    "000123", "7e0", "1.e5", "+.5E-3", "0.1", "0.30000000000000004",
])
def test_parse_float_matches_python(s):
    v, ok = pf(s)
    assert ok
    f = float(s)
    assert v == f and math.copysign(1, v) == math.copysign(1, f), (s, v, f)


@pytest.mark.parametrize("s", [
    "", "+", "-", ".", "e5", "1e", "1e+", "inf", "nan", "-inf", "NaN", "Infinity", "--1",
    "1.2.3", "0x10", "1_000", "1,5", "1e5.5", " 1", "1 ", "abc", "1f",
])
def test_parse_float_rejects(s):
    assert not pf(s)[1]


def _random_number_string(r):
    nd = r.randint(1, 18)
    digs = "".join(r.choice("0123456789") for _ in range(nd))
    k = r.randint(0, nd)
    m = digs[:k] + ("." if r.random() < 0.7 else "") + digs[k:]
    if m == ".":
        m = "0."
    s = r.choice(["", "-", "+"]) + m
    if r.random() < 0.5:
        s += r.choice("eE") + r.choice(["", "-", "+"]) + str(r.randint(0, r.choice([5, 25, 280])))
    return s


def test_parse_float_random_up_to_18_digits_exact():
    r = random.Random(11)
    for _ in range(30000):
        s = _random_number_string(r)
        v, ok = pf(s)
        assert ok, s
        f = float(s)
        if f != 0 and abs(f) < 2.2250738585072014e-308:
            continue  # subnormal results may be 1 ulp off (documented)
        assert v == f, (s, v, f)


def test_parse_float_long_mantissas_within_one_ulp():
    r = random.Random(12)
    for _ in range(5000):
        nd = r.randint(19, 30)
        digs = str(r.randint(1, 9)) + "".join(r.choice("0123456789") for _ in range(nd - 1))
        k = r.randint(0, nd)
        s = digs[:k] + "." + digs[k:] + "e" + str(r.randint(-200, 200))
        v, ok = pf(s)
        f = float(s)
        assert ok and abs(v - f) <= math.ulp(f), (s, v, f)


def test_parse_float_huge_exponent_offset_by_long_mantissa():
    """An exponent of 7+ digits offset by as many mantissa digits (a 2 MB number) is read
    exactly; the exponent used to saturate at ~10**5 (-> 0.0 / inf). Found by fuzzing."""
    for s in ["0." + "0" * 2000000 + "1e2000001", "1" + "0" * 2000001 + "e-2000001",
              "1e-99999999999999999999", "-0.1e1000000000000000000000"]:
        v, ok = pf(s)
        assert ok and v == float(s), (s[:12], v)


def test_parse_float_repr_roundtrip():
    g = np.random.default_rng(0)
    x = g.standard_normal(20000) * 10.0 ** g.integers(-300, 300, 20000)
    for f in x.tolist():
        assert pf(repr(f))[0] == f


# ------------------------------------------------------------------------------ VW grammar

def vw(text, **kw):
    kw.setdefault("constant", False)
    return parse_vw(text, ReaderConfig(fmt="vw", **kw))


def test_vw_basic_example():
    b = vw("1 'tag1|a x y:2 |b z 12 |bb w:0.5\n")
    assert b.n == 1 and b.labels.tolist() == [1.0] and b.weights.tolist() == [1.0]
    assert b.tag(0) == "tag1"
    ha = "a"
    exp = sorted([(feature_hash("x", ha), 1.0), (feature_hash("y", ha), 2.0),
                  (feature_hash("z", "b"), 1.0), (feature_hash("12", "b"), 1.0),
                  (feature_hash("w", "bb"), 0.5)])
    assert rows(b)[0] == exp
    assert b.indices.dtype == np.uint32 and b.values.dtype == np.float64
    assert b.offsets.dtype == np.int64 and b.text.dtype == np.uint8


def test_vw_label_importance_base_tag():
    b = vw("2 0.5 'q |ns:0.5 p:4 3\n-1 3 0.2 |a x\n| h\n 'only |a x\n1 2 3 'lbl|a x\n")
    assert b.labels[0] == 2 and b.weights[0] == 0.5 and b.tag(0) == "q"
    assert rows(b)[0] == sorted([(feature_hash("p", "ns"), 2.0), (feature_hash("3", "ns"), 0.5)])
    assert b.labels[1] == -1 and b.weights[1] == 3 and b.tag(1) is None
    assert math.isnan(b.labels[2]) and b.weights[2] == 1 and b.tag(2) is None
    assert math.isnan(b.labels[3]) and b.tag(3) == "only"
    assert b.labels[4] == 1 and b.weights[4] == 2 and b.tag(4) == "lbl"


def test_vw_tag_touching_bar_like_vw():
    # VW 9: the last label token is the tag when it starts with ' or touches the bar
    b = vw("-1 abc| f\n1 'abc| f\n1| g\n")
    assert b.labels[0] == -1 and b.tag(0) == "abc"
    assert b.labels[1] == 1 and b.tag(1) == "abc"
    assert math.isnan(b.labels[2]) and b.tag(2) == "1"


def test_vw_namespaces_and_values():
    b = vw("1 |a x:0 y |b:2 u v:-1.5 |c:0 k | d\n")
    exp = sorted([(feature_hash("y", "a"), 1.0), (feature_hash("u", "b"), 2.0),
                  (feature_hash("v", "b"), -3.0), (feature_hash("d"), 1.0)])
    assert rows(b)[0] == exp  # zero values (and namespace weight 0) dropped, as VW
    b = vw("1 |a x|b y\n1 |a :3 k\n")
    assert rows(b)[0] == sorted([(feature_hash("x", "a"), 1.0), (feature_hash("y", "b"), 1.0)])
    assert rows(b)[1] == sorted([(feature_hash("", "a"), 3.0), (feature_hash("k", "a"), 1.0)])


def test_vw_whitespace_variants():
    ref = rows(vw("1 |a x y:3\n"))
    for line in ["1\t|a\tx\ty:3\n", "  1   |a  x   y:3   \n", "1 |a x y:3\r\n", "1 |a x y:3"]:
        b = vw(line)
        assert rows(b) == ref and b.labels.tolist() == [1.0], repr(line)


def test_vw_unicode_names():
    b = vw("-1 |café naïve:2 日本語\n")
    assert rows(b)[0] == sorted([(feature_hash("naïve", "café"), 2.0),
                                 (feature_hash("日本語", "café"), 1.0)])


def test_vw_constant_and_quadratic():
    b = parse_vw("1 |a x y:2 |b z\n", ReaderConfig(quadratic=("ab",)))
    hx, hy, hz = feature_hash("x", "a"), feature_hash("y", "a"), feature_hash("z", "b")
    exp = sorted([(hx, 1.0), (hy, 2.0), (hz, 1.0), (CONSTANT_HASH, 1.0),
                  (quadratic_hash(hx, hz), 1.0), (quadratic_hash(hy, hz), 2.0)])
    assert rows(b)[0] == exp


def test_vw_self_interaction_pairs():
    # VW 9 -q aa: pairs (i, j) with j >= i, namespaces grouped by first letter
    b = vw("1 |a x y:2 |alpha z:3\n", quadratic=("aa",))
    h = [feature_hash("x", "a"), feature_hash("y", "a"), feature_hash("z", "alpha")]
    v = [1.0, 2.0, 3.0]
    exp = [(h[i], v[i]) for i in range(3)]
    exp += [(quadratic_hash(h[i], h[j]), v[i] * v[j]) for i in range(3) for j in range(i, 3)]
    assert rows(b)[0] == sorted(exp)


def test_vw_keep_names():
    b = parse_vw("1 't |a x y:2 | 7\n", ReaderConfig(keep_names=True, quadratic=("aa",)))
    names = [b.feature_name(k) for k in range(b.nnz)]
    assert names[:3] == ["a^x", "a^y", "7"]
    assert names[3:] == [None] * (b.nnz - 3)  # constant and quadratic: no span
    b2 = parse_vw("1 |a x\n")
    assert b2.name_start is None and b2.feature_name(0) is None


def _golden(name):
    return [[(int(t.split(":")[0]), float(t.split(":")[1])) for t in line.split()]
            for line in (DATA / name).read_text().splitlines()]


@pytest.mark.parametrize("golden,quadratic,constant", [
    ("io_vw_golden_q_ab_cc.txt", ("ab", "cc"), True),
    ("io_vw_golden_q_ba_aa.txt", ("ba", "aa"), True),
    ("io_vw_golden_noconst.txt", (), False),
])
def test_vw_golden_indices(golden, quadratic, constant):
    """Masked hashes equal the indices VW 9.11.9 prints with --audit -b 18."""
    exp = _golden(golden)
    cfg = ReaderConfig(quadratic=quadratic, constant=constant)
    (b,) = list(read_batches([str(DATA / "io_vw_golden_input.vw")], cfg))
    assert b.n == len(exp) and not b.extra["errors"]
    for i, e in enumerate(exp):
        lo, hi = b.offsets[i], b.offsets[i + 1]
        got = sorted(zip((b.indices[lo:hi] & MASK18).tolist(), b.values[lo:hi].tolist()))
        e = sorted(e)
        assert [g[0] for g in got] == [x[0] for x in e], f"example {i + 1}"
        np.testing.assert_allclose([g[1] for g in got], [x[1] for x in e], rtol=1e-5)
    assert b.tags()[:4] == ["tag1", "abc", None, "q"]


# ------------------------------------------------------------------------------ LIBSVM

def test_libsvm_basic():
    b = parse_libsvm("+1 3:1 11:0.5 14:1e-2 # comment\n-1 qid:7 1:2 5:0\n0\n2 4294967297:1\n",
                     ReaderConfig(constant=False))
    assert b.labels.tolist() == [1.0, -1.0, 0.0, 2.0]
    assert rows(b) == [[(3, 1.0), (11, 0.5), (14, 0.01)], [(1, 2.0)], [], [(1, 1.0)]]


def test_libsvm_equals_vw_default_namespace():
    lib = "1 3:1 11:0.25 123:2\n-1 7:1\n"
    vwt = "1 | 3:1 11:0.25 123:2\n-1 | 7:1\n"
    a = parse_libsvm(lib, ReaderConfig(quadratic=("  ",)))
    b = parse_vw(vwt, ReaderConfig(quadratic=("  ",)))
    assert rows(a) == rows(b)
    assert a.labels.tolist() == b.labels.tolist()


def test_libsvm_comment_only_and_blank_lines():
    b = parse_libsvm("# header\n\n1 1:1\n   \n# x\n-1 2:1\n")
    assert b.n == 2 and b.lines.tolist() == [3, 6]


# ------------------------------------------------------------------------------ malformed

@pytest.mark.parametrize("line,reason", [
    ("abc |a x", "non-numeric label"),
    ("1 x |a y", "bad importance weight"),
    ("1 1 zz |a y", "bad base"),
    ("1 2 3 4 |a x", "too many tokens"),
    ("1 |a x:abc", "bad feature value"),
    ("1 |a x:", "bad feature value"),
    ("1 |a x:inf", "feature value is NaN or infinite"),
    ("1 |a x:nan", "feature value is NaN or infinite"),
    ("1 |a x:1e999", "feature value is NaN or infinite"),
    ("1 |a x:-Infinity|b y", "feature value is NaN or infinite"),
    ("1 |a x:infx", "bad feature value"),
    ("1 |a:x y", "bad namespace weight"),
    ("1 |a: y", "bad namespace weight"),
    # NaN / inf anywhere on the line (issue 6): rejected with its own reason
    ("nan |a x", "label is NaN or infinite"),
    ("-INF |a x", "label is NaN or infinite"),
    ("1e400 |a x", "label is NaN or infinite"),
    ("1 inf |a x", "importance weight is NaN or infinite"),
    ("1 1 NaN |a x", "base (initial prediction) value is NaN or infinite"),
    ("1 |a:inf y", "namespace weight is NaN or infinite"),
    ("1 |a:1e300 y:1e10", "overflows the double range"),
])
def test_vw_malformed_lines(line, reason, tmp_path):
    p = tmp_path / "bad.vw"
    p.write_text(f"1 |a ok\n{line}\n-1 |b ok\n")
    res = collect([str(p)], ReaderConfig(fmt="vw"))
    assert res["lines"] == [1, 3] and res["labels"] == [1.0, -1.0]
    assert len(res["errors"]) == 1
    src, ln, why = res["errors"][0]
    assert src == str(p) and ln == 2 and reason in why
    with pytest.raises(InputError, match=re.escape(f"{p}:2: ") + ".*" + re.escape(reason)):
        list(read_batches([str(p)], ReaderConfig(fmt="vw", strict=True)))


@pytest.mark.parametrize("line,reason", [
    ("x 1:1", "non-numeric label"),
    ("1 5", "without ':'"),
    ("1 a:1", "index"),
    ("1 -3:1", "index"),
    ("1 1.5:1", "index"),
    ("1 :1", "index"),
    ("1 3:x", "bad feature value"),
    ("1 3:", "bad feature value"),
    ("1 3:1:2", "bad feature value"),
    ("nan 1:1", "label is NaN or infinite"),
    ("1e999 1:1", "label is NaN or infinite"),
    ("1 3:inf", "feature value is NaN or infinite"),
    ("1 3:-nan", "feature value is NaN or infinite"),
    ("1 3:2e308", "feature value is NaN or infinite"),
])
def test_libsvm_malformed_lines(line, reason, tmp_path):
    p = tmp_path / "bad.libsvm"
    p.write_text(f"1 1:1\n{line}\n-1 2:1\n")
    res = collect([str(p)], ReaderConfig(fmt="libsvm"))
    assert res["lines"] == [1, 3]
    assert [(e[1], reason in e[2]) for e in res["errors"]] == [(2, True)]
    with pytest.raises(InputError, match=re.escape(f"{p}:2: ")):
        list(read_batches([str(p)], ReaderConfig(fmt="libsvm", strict=True)))


def test_quadratic_product_overflow_is_malformed():
    """A -q product of two finite values can overflow to inf: the line is rejected (the
    learner would otherwise see inf), the next lines are unaffected."""
    text = "1 |a x:1e200 |b y:1e200\n-1 |a x:1e100 |b y:1e100\n"
    b = parse_vw(text, ReaderConfig(quadratic=("ab",)))
    assert b.lines.tolist() == [2] and np.isfinite(b.values).all()
    assert [(e[1], "-q interaction value" in e[2]) for e in b.extra["errors"]] == [(1, True)]
    b = parse_vw(text)  # without -q both lines are fine
    assert b.n == 2 and not b.extra["errors"]
    b = parse_libsvm("1 1:1e300 2:1e300\n", ReaderConfig(quadratic=("  ",)))
    assert b.n == 0 and "overflows" in b.extra["errors"][0][2]


def test_underflow_is_zero_and_dropped():
    b = parse_vw("1e-400 |a x:1e-400 y\n", ReaderConfig(constant=False))
    assert b.labels.tolist() == [0.0] and rows(b)[0] == [(feature_hash("y", "a"), 1.0)]


# ------------------------------------------------------------------------------ sources

def _varied_vw_lines(n=300, seed=0):
    r = random.Random(seed)
    lines = []
    for i in range(n):
        k = r.random()
        if k < 0.05:
            lines.append("")
            continue
        label = r.choice(["1", "-1", "0.5", "", "3"])
        tag = r.choice(["", f"'t{i}", f" 'tag{i}"]) if label else r.choice(["", f"'t{i}"])
        feats = " ".join(f"f{r.randrange(50)}:{r.uniform(-3, 3):.4g}" for _ in range(r.randrange(8)))
        longpart = " ".join(f"w{j}" for j in range(r.randrange(40))) if k > 0.9 else ""
        lines.append(f"{label} {tag}|a {feats} |b{r.randrange(3)} x y {longpart}")
    return "\n".join(lines) + "\n"


def test_chunk_boundary_invariance(tmp_path):
    p = tmp_path / "v.vw"
    p.write_text(_varied_vw_lines())
    big = collect([str(p)], ReaderConfig(quadratic=("ab",)))
    for cb in (1, 64, 100, 1000):
        small = collect([str(p)], ReaderConfig(quadratic=("ab",), chunk_bytes=cb))
        assert small == big, cb
    nb = len(list(read_batches([str(p)], ReaderConfig(chunk_bytes=64))))
    assert nb > 10


def test_line_numbers_across_chunks_and_files(tmp_path):
    text = "\n\n1 |a x\n\n\n-1 |a y\n   \n2 |a z"  # no final newline: last line counts
    p1 = tmp_path / "one.vw"
    p2 = tmp_path / "two.vw"
    p1.write_text(text)
    p2.write_text("5 |b q\n")
    for cb in (1, 7, 1 << 20):
        res = collect([str(p1), str(p2)], ReaderConfig(chunk_bytes=cb))
        assert res["lines"] == [3, 6, 8, 1]
        assert res["labels"] == [1.0, -1.0, 2.0, 5.0]
        assert res["sources"] == [str(p1)] * 3 + [str(p2)]


def test_gzip_plain_stdin_equivalence(tmp_path, monkeypatch):
    text = _varied_vw_lines(200, seed=3).encode()
    plain = tmp_path / "d.vw"
    plain.write_bytes(text)
    gz = tmp_path / "d.data"  # gzip detected by magic bytes, not by extension
    gz.write_bytes(gzip.compress(text))
    cfg = ReaderConfig(chunk_bytes=512)
    ref = collect([str(plain)], cfg)
    res_gz = collect([str(gz)], cfg)
    assert res_gz["sources"][0] == str(gz)
    for k in ("rows", "labels", "weights", "lines", "tags", "errors"):
        assert res_gz[k] == ref[k]
    for payload in (text, gzip.compress(text)):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
        res = collect(["-"], cfg)
        assert res["sources"][0] == "<stdin>"
        for k in ("rows", "labels", "weights", "lines", "tags"):
            assert res[k] == ref[k]


def test_multimember_gzip(tmp_path):
    p = tmp_path / "m.gz"
    p.write_bytes(gzip.compress(b"1 |a x\n") + gzip.compress(b"-1 |a y\n"))
    assert collect([str(p)], ReaderConfig())["labels"] == [1.0, -1.0]


def test_truncated_and_corrupt_gzip(tmp_path):
    data = gzip.compress(_varied_vw_lines(2000).encode())
    p = tmp_path / "t.vw.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=re.escape(str(p)) + ": gzip stream is truncated"):
        list(read_batches([str(p)], ReaderConfig(chunk_bytes=4096)))
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0xFF
    bad[len(bad) // 2 + 1] ^= 0x55
    q = tmp_path / "c.vw.gz"
    q.write_bytes(bytes(bad))
    with pytest.raises(InputError, match=re.escape(str(q))):
        list(read_batches([str(q)], ReaderConfig()))


def test_missing_file(tmp_path):
    p = tmp_path / "nope.vw"
    with pytest.raises(InputError, match=re.escape(str(p))):
        list(read_batches([str(p)], ReaderConfig()))
    with pytest.raises(InputError, match=re.escape(str(tmp_path))):
        list(read_batches([str(tmp_path)], ReaderConfig()))


def test_auto_format_sniffing(tmp_path):
    v = tmp_path / "a.txt"
    v.write_text("\n\n1 |a 3:1\n")
    l = tmp_path / "b.txt"
    l.write_text("\n1 3:1\n")
    rv = collect([str(v)], ReaderConfig(constant=False))
    rl = collect([str(l)], ReaderConfig(constant=False))
    assert rv["rows"] == [[(feature_hash("3", "a"), 1.0)]]
    assert rl["rows"] == [[(3, 1.0)]]


def test_magic_dispatch_to_registered_reader(tmp_path, monkeypatch):
    calls = []

    def fake_parquet(stream, name, cfg):
        calls.append((stream.read(4), name))
        yield from ()

    monkeypatch.setitem(source_mod.READERS, "parquet", fake_parquet)
    p = tmp_path / "x.bin"
    p.write_bytes(b"PAR1 rest of the file")
    assert list(read_batches([str(p)], ReaderConfig())) == []
    assert calls == [(b"PAR1", str(p))]


def test_unknown_format():
    with pytest.raises(ConfigError):
        list(read_batches(["whatever"], ReaderConfig(fmt="csv")))


def test_long_line_longer_than_chunk(tmp_path):
    feats = " ".join(f"f{i}:{i}" for i in range(1, 2000))
    p = tmp_path / "long.vw"
    p.write_text(f"1 |a x\n-1 |a {feats}\n2 |a y\n")
    res = collect([str(p)], ReaderConfig(chunk_bytes=16, constant=False))
    assert res["lines"] == [1, 2, 3] and len(res["rows"][1]) == 1999


def test_batch_text_and_tags_survive_next_chunk(tmp_path):
    p = tmp_path / "t.vw"
    p.write_text("".join(f"{i} 'tag{i} |a x\n" for i in range(100)))
    bs = list(read_batches([str(p)], ReaderConfig(chunk_bytes=50)))
    tags = [t for b in bs for t in b.tags()]
    assert tags == [f"tag{i}" for i in range(100)]


def test_batch_keeps_its_text_only_when_something_points_into_it(tmp_path):
    """A batch in flight holds the chunk's bytes only for tags or feature names (memory)."""
    p = tmp_path / "t.vw"
    p.write_text("1 |a x\n-1 'only |a y\n" + "1 |a z\n" * 50)
    plain = list(read_batches([str(p)], ReaderConfig(chunk_bytes=64)))
    assert len(plain) > 2
    assert plain[0].text is not None and plain[0].tags()[:2] == [None, "only"]
    for b in plain[1:]:
        assert b.text is None and b.tag_start is None and b.tags() == [None] * b.n
    named = list(read_batches([str(p)], ReaderConfig(chunk_bytes=64, keep_names=True)))
    assert all(b.text is not None for b in named)
    assert named[-1].feature_name(0) == "a^z"


def test_truncated_gzip_keeps_the_good_lines_before_the_damage(tmp_path):
    """Both the sequential and the parallel reader deliver every complete line read before
    the truncation, then raise InputError naming the file."""
    import gzip as _gz

    lines = b"".join(b"%d | a:%d b\n" % (i % 2, i) for i in range(60000))
    p = tmp_path / "t.gz"
    p.write_bytes(_gz.compress(lines)[:-300])
    for reader in (lambda: read_batches([str(p)], ReaderConfig(chunk_bytes=1 << 16)),
                   lambda: read_batches([str(p)], ReaderConfig(chunk_bytes=1 << 16, parse_threads=2))):
        got = 0
        with pytest.raises(InputError, match="t.gz: gzip stream is truncated"):
            for b in reader():
                assert (b.lines == np.arange(got + 1, got + b.n + 1)).all()
                got += b.n
        assert 50000 < got < 60000


def test_unit_norm_rows_against_numpy():
    from streamlearn.batch import CONSTANT_HASH, Batch, unit_norm_rows
    rng = np.random.default_rng(3)
    rows = [[(5, 3.0), (CONSTANT_HASH, 4.0)],                 # norm 5, the constant included
            [(CONSTANT_HASH, 1.0)],
            [],                                             # empty row
            [(int(h), float(v)) for h, v in zip(rng.integers(0, 2**32, 9), rng.normal(size=9))]]
    offsets = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    idx = np.array([h for r in rows for h, _ in r], np.uint32)
    val = np.array([v for r in rows for _, v in r], np.float64)
    b = Batch(offsets, idx, val.copy(), np.ones(4), np.ones(4))
    got = unit_norm_rows(b).values
    want = []
    for r in rows:
        nrm = math.sqrt(sum(v * v for _, v in r))
        want += [v / nrm for _, v in r]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert got[:3].tolist() == pytest.approx([0.6, 0.8, 1.0], rel=1e-15)
