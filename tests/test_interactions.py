"""Interactions of any order, VW's ``:`` wildcard, ``--leave_duplicate_interactions``,
``--ignore`` / ``--keep`` / ``--ignore_linear``: the reader's features against VW 9.11.9's
(tests/data/io_vw_golden_*.txt, made by tests/data/make_io_vw_golden.sh; no VW needed here),
against a slow reference written from VW's rules (interactions_predict.h), and the list
processing of parse_args.cc / interactions.h case by case."""
import itertools
import random

import numpy as np
import pytest

from streamlearn import kernels
from streamlearn.errors import ConfigError
from streamlearn.io import ReaderConfig, read_batches
from streamlearn.io.hashing import CONSTANT_HASH, FNV_PRIME
from streamlearn.io.interactions import Interactions, expand, normalize

from conftest import DATA

MASK18 = (1 << 18) - 1
INPUT = DATA / "io_vw_golden_input.vw"

GOLDEN = {
    "io_vw_golden_cubic.txt": dict(cubic=("abc", "aba"), quadratic=("ba", "ab")),
    "io_vw_golden_wild_qq.txt": dict(quadratic=("::",)),
    "io_vw_golden_wild_mixed.txt": dict(quadratic=("a:", "ab"), cubic=("::c",)),
    "io_vw_golden_inter4.txt": dict(interactions=("abcb", "aaaa", ":b")),
    "io_vw_golden_leave_dup.txt": dict(quadratic=("ab", "ba", ":a"), leave_duplicate_interactions=True),
    "io_vw_golden_ignore.txt": dict(ignore=("a", " "), quadratic=("bc", "::")),
    "io_vw_golden_keep.txt": dict(keep=("b", "c"), cubic=("bbc",)),
}


def _golden(name):
    return [[(int(t.split(":")[0]), float(t.split(":")[1])) for t in line.split()]
            for line in (DATA / name).read_text().splitlines()]


@pytest.fixture(params=["c", "numba"])
def backend(request):
    """Run a test on the C kernels and on numba (the seam restored afterwards)."""
    if request.param == "c" and kernels.backend() != "c":
        pytest.skip("no C library")
    saved = (kernels._use_c, kernels._lib_path)  # the session's library (conftest may build one)
    kernels.configure(use_c=request.param == "c", lib_path=saved[1])
    yield request.param
    kernels.configure(*saved)


@pytest.mark.parametrize("golden", sorted(GOLDEN))
def test_features_equal_vws(golden, backend):
    """Per example, the multiset of (index at -b 18, value) equals what VW prints with --audit
    (VW's audit order is by |weight * value|, so the order is not compared)."""
    exp = _golden(golden)
    (b,) = list(read_batches([str(INPUT)], ReaderConfig(**GOLDEN[golden])))
    assert b.n == len(exp) and not b.extra["errors"]
    for i, e in enumerate(exp):
        lo, hi = b.offsets[i], b.offsets[i + 1]
        got = sorted(zip((b.indices[lo:hi] & MASK18).tolist(), b.values[lo:hi].tolist()))
        e = sorted(e)
        assert [g[0] for g in got] == [x[0] for x in e], f"{golden} example {i + 1}"
        np.testing.assert_allclose([g[1] for g in got], [x[1] for x in e], rtol=1e-5)


def test_ignore_linear_learns_what_vw_learns(backend):
    """--ignore_linear a -q ab: the features of the labeled examples are exactly those VW's
    --readable_model holds a weight for (a's interactions, not a's own features; VW's audit
    would still list them, so the golden is the model's index set)."""
    exp = [int(x) for x in (DATA / "io_vw_golden_ignore_linear.txt").read_text().split()]
    (b,) = list(read_batches([str(INPUT)], ReaderConfig(ignore_linear=("a",), quadratic=("ab",))))
    got = {int(h) & MASK18 for i in np.flatnonzero(~np.isnan(b.labels))
           for h in b.indices[b.offsets[i]:b.offsets[i + 1]]}
    assert sorted(got) == exp
    (plain,) = list(read_batches([str(INPUT)], ReaderConfig(quadratic=("ab",))))
    assert b.nnz < plain.nnz  # the linear a features are gone


# ------------------------------------------------------------------------------ reference

def _reference(rows, inters):
    """Slow, obvious VW interactions of ``rows`` (lists of (letter, hash, value)): for each
    interaction (as VW's compiled list), every choice of one feature per term in which
    positions do not decrease along a run of the same namespace; hash h1, then
    (h * FNV) ^ h_next; value the product."""
    out = []
    for feats in rows:
        by = {}
        for c, h, v in feats:
            by.setdefault(c, []).append((h, v))
        res = []
        for t in inters:
            lists = [list(enumerate(by.get(c, []))) for c in t]
            for combo in itertools.product(*lists):
                if any(t[j] == t[j - 1] and combo[j][0] < combo[j - 1][0] for j in range(1, len(t))):
                    continue
                h, v = combo[0][1]
                for _, (h2, v2) in combo[1:]:
                    h = ((h * FNV_PRIME) & 0xFFFFFFFF) ^ h2
                    v = v * v2
                res.append((h, v))
        out.append(res)
    return out


def _random_vw(r, n):
    lines, rows = [], []
    for _ in range(n):
        parts, feats = ["1"], []
        for _ in range(r.randint(0, 4)):
            ns = r.choice(["a", "ab", "b", "c", "", "d"])
            toks = []
            for _ in range(r.randint(0, 3)):
                name = r.choice(["x", "y", "z", "w1", "q"])
                val = r.choice([1.0, 2.0, -0.5, 3.0])
                toks.append(f"{name}:{val}")
                feats.append((ord(ns[0]) if ns else 32, name, ns, val))
            parts.append("|" + ns + " " + " ".join(toks))
        lines.append(" ".join(parts))
        rows.append(feats)
    return "\n".join(lines) + "\n", rows


@pytest.mark.parametrize("spec", [dict(cubic=("abc", "aab")), dict(interactions=("abab", "cccc", "a b")),
                                  dict(quadratic=("::",)), dict(cubic=(":::",)),
                                  dict(interactions=(":a:b",), leave_duplicate_interactions=True)])
def test_kernel_equals_the_slow_reference(spec, backend, tmp_path):
    from streamlearn.io.hashing import feature_hash
    r = random.Random(7)
    text, rows = _random_vw(r, 60)
    p = tmp_path / "r.vw"
    p.write_text(text)
    cfg = ReaderConfig(constant=False, **spec)
    (b,) = list(read_batches([str(p)], cfg))
    hashed = [[(c, feature_hash(name, ns or None), v) for c, name, ns, v in feats] for feats in rows]
    present = {c for feats in rows for c, *_ in feats}
    inters = expand(cfg.inter.inters, present, cfg.leave_duplicate_interactions)
    ref = _reference(hashed, inters)
    for i, feats in enumerate(hashed):
        lo, hi = b.offsets[i], b.offsets[i + 1]
        lin = [(h, v) for _, h, v in feats]
        exp = lin + ref[i]
        got = list(zip(b.indices[lo:hi].tolist(), b.values[lo:hi].tolist()))
        assert got == exp, f"example {i}: {text.splitlines()[i]}"


def test_constant_survives_ignore_and_keep():
    """VW adds the constant after dropping namespaces: --keep / --ignore never drop it."""
    for kw in (dict(keep=("z",)), dict(ignore=("a",))):
        (b,) = list(read_batches([str(INPUT)], ReaderConfig(**kw)))
        assert (b.indices == CONSTANT_HASH).sum() == b.n


def test_parquet_reader_takes_the_same_interactions_and_flags():
    for kw in ({"cubic": ("abb",)}, {"quadratic": ("::",)}, {"ignore": ("a",), "quadratic": ("b:",)},
               {"keep": ("a",)}, {"ignore_linear": ("b",), "quadratic": ("ab",)}):
        pq = list(read_batches([str(DATA / "pq_namespaces.parquet")], ReaderConfig(**kw)))
        txt = list(read_batches([str(DATA / "pq_namespaces.vw")], ReaderConfig(**kw)))
        a = [(x.offsets.tolist(), x.indices.tolist(), x.values.tolist()) for x in pq]
        t = [(x.offsets.tolist(), x.indices.tolist(), x.values.tolist()) for x in txt]
        assert a == t, kw


# ------------------------------------------------------------------------------ list rules

def test_list_processing_like_vw():
    """parse_args.cc: sort (shorter first), merge same multisets into the first, rewrite
    interactions with a repeated namespace sorted."""
    assert normalize([b"ba", b"ab"]) == [b"ab"]
    assert normalize([b"ba", b"ba"]) == [b"ba"]
    assert normalize([b"abc", b"cc", b"ab"]) == [b"ab", b"cc", b"abc"]
    assert normalize([b"aba"]) == [b"aab"]  # must_be_left_sorted
    assert normalize([b"bab", b"abc", b"cba"]) == [b"abc", b"abb"]  # sorted before the rewrite
    assert normalize([b"ab", b"ba"], leave_duplicates=True) == [b"ab", b"ba"]
    assert normalize([b"a::"]) == [b"::a"]
    assert normalize([b"a:", b":a"]) == [b":a"]


def test_wildcard_expansion_like_vw():
    """compile_interactions: combinations with repetition over the printable namespaces seen
    (permutations with --leave_duplicate_interactions), fixed letters in place, then the list
    rules again."""
    assert expand([b"::"], {97, 98}) == [b"aa", b"ab", b"bb"]
    assert expand([b"::"], {97, 98}, True) == [b"aa", b"ab", b"ba", b"bb"]
    assert expand([b":a"], {97, 98, 32}) == [b" a", b"aa", b"ba"]
    assert expand([b"::"], {0x80, 97}) == [b"aa"]  # reserved namespaces take no part
    assert expand([b"ab", b"::"], {97, 98}) == [b"aa", b"ab", b"bb"]
    assert expand([b"::c"], {97, 99}) == [b"aac", b"acc", b"ccc"]
    assert expand([b"::"], set()) == []


def test_namespace_flags():
    it = Interactions(ignore=("ab",), keep=(), ignore_linear=("\\x20",))
    assert it.nsflags[ord("a")] == it.nsflags[ord("b")] == 1 and it.nsflags[32] == 2
    it = Interactions(ignore=("a",), keep=("ab",))  # --keep wins, as in VW (written last)
    assert it.nsflags[ord("a")] == 0 and it.nsflags[ord("b")] == 0 and it.nsflags[ord("c")] == 1
    with pytest.raises(ConfigError, match="at most 64"):
        Interactions(interactions=("a" * 65,))


def test_chunks_shrink_when_interactions_blow_up(tmp_path, monkeypatch):
    """A chunk's batch holds about BATCH_ENTRIES entries whatever the interactions make of its
    text (memory bounded by a few batches), and the features are those of one big chunk."""
    from streamlearn.io import source
    r = random.Random(3)
    lines = [f"1 |a {' '.join(f'x{r.randrange(99)}' for _ in range(8))} |b {' '.join(f'y{k}' for k in range(6))}"
             for _ in range(400)]
    p = tmp_path / "c.vw"
    p.write_text("\n".join(lines) + "\n")
    whole = list(read_batches([str(p)], ReaderConfig(cubic=("aab",), chunk_bytes=1 << 20, parse_threads=1)))
    monkeypatch.setattr(source, "BATCH_ENTRIES", 4000)
    monkeypatch.setattr(source, "MIN_CHUNK_BYTES", 256)
    monkeypatch.setattr(source, "FIRST_CHUNK_BYTES", 4096)
    parts = list(read_batches([str(p)], ReaderConfig(cubic=("aab",), chunk_bytes=1 << 20, parse_threads=1)))
    per_line = whole[0].nnz / whole[0].n
    assert len(whole) == 1 and len(parts) > 10
    assert parts[0].nnz > 4000 and max(b.nnz for b in parts[1:]) <= 4000 + 2 * per_line
    assert np.concatenate([b.indices for b in parts]).tolist() == whole[0].indices.tolist()
    assert np.concatenate([b.values for b in parts]).tolist() == whole[0].values.tolist()
