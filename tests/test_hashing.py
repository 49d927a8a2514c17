"""VW-compatible hashing: compiled MurmurHash3 vs the mmh3 package, VW's hashstring rules,
interaction hashes and -q normalisation (checked against VW 9.11.9 --audit by hand)."""
import random

import mmh3
import numpy as np
import pytest

from streamlearn.errors import ConfigError
from streamlearn.io.hashing import (
    CONSTANT_HASH,
    feature_hash,
    hash_spans,
    hash_strings,
    hashstring,
    murmur3_32,
    namespace_hash,
    quadratic_hash,
)
from streamlearn.io.interactions import Interactions

MASK18 = (1 << 18) - 1


def test_murmur_matches_mmh3_random():
    rng = random.Random(1234)
    datas, seeds = [], []
    for _ in range(3000):
        n = rng.randrange(41)
        datas.append(bytes(rng.randrange(256) for _ in range(n)))
        seeds.append(rng.randrange(1 << 32))
    for d, s in zip(datas, seeds):
        assert murmur3_32(d, s) == mmh3.hash(d, s, signed=False), (d, s)
    # the vectorised hashstring kernel over one buffer agrees with the scalar rule
    buf = np.frombuffer(b"".join(datas) + b"\0", np.uint8)
    lens = np.array([len(d) for d in datas], np.int64)
    ends = np.cumsum(lens)
    got = hash_spans(buf, ends - lens, ends, np.array(seeds, np.uint64))
    exp = np.array([hashstring(d, s) for d, s in zip(datas, seeds)], np.uint32)
    np.testing.assert_array_equal(got, exp)


def test_murmur_known_values():
    assert murmur3_32(b"", 0) == 0
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32("hello", 0) == mmh3.hash("hello", 0, signed=False)
    assert murmur3_32("日本語", 7) == mmh3.hash("日本語".encode(), 7, signed=False)


def test_hashstring_rules():
    # all digits: int + seed (mod 2**32)
    assert hashstring("12", 0) == 12
    assert hashstring("12", 100) == 112
    assert hashstring("00042", 5) == 47
    assert hashstring("4294967297", 0) == 1  # wraps mod 2**32
    assert hashstring("12", 0xFFFFFFFF) == 11
    # blanks trimmed first (VW trims bytes <= 0x20)
    assert hashstring(" 12 ", 3) == 15
    assert hashstring(" ab\t", 3) == murmur3_32(b"ab", 3)
    # not all digits -> murmur
    assert hashstring("-12", 0) == murmur3_32(b"-12", 0)
    assert hashstring("1.5", 9) == murmur3_32(b"1.5", 9)
    assert hashstring("x", 0) == murmur3_32(b"x", 0)
    # empty name -> seed
    assert hashstring("", 77) == 77


def test_vw_audit_values():
    """Indices printed by `vw --audit -b 18` (VW 9.11.9) for a few features."""
    assert feature_hash("x", "a") & MASK18 == 55432
    assert feature_hash("y", "a") & MASK18 == 42847
    assert feature_hash("12", "b") & MASK18 == 163343
    assert feature_hash("", "a") & MASK18 == 92594  # `|a :3`
    assert feature_hash("f") & MASK18 == 34875  # default namespace
    assert CONSTANT_HASH & MASK18 == 116060
    assert quadratic_hash(feature_hash("x", "a"), feature_hash("z", "b")) & MASK18 == 80151
    assert quadratic_hash(feature_hash("x", "a"), feature_hash("x", "a")) & MASK18 == 1680


def test_namespace_hash_default():
    for d in (None, "", " "):
        assert namespace_hash(d) == 0
    assert namespace_hash("a") == murmur3_32(b"a", 0)
    assert namespace_hash("3") == 3


def test_hash_strings_vectorised():
    names = ["a", "12", "", "café", "x y"]
    got = hash_strings(names, seed=5)
    assert got.dtype == np.uint32
    assert got.tolist() == [hashstring(n, 5) for n in names]
    assert hash_strings([]).tolist() == []


def test_quadratic_hash_formula():
    rng = random.Random(3)
    for _ in range(100):
        a, b = rng.randrange(1 << 32), rng.randrange(1 << 32)
        assert quadratic_hash(a, b) == ((a * 16777619) ^ b) & 0xFFFFFFFF


def _pairs(q):
    return [t.decode() for t in Interactions(quadratic=q).inters]


def test_quadratic_pairs_like_vw():
    assert _pairs(("ab",)) == ["ab"]
    assert _pairs(("ba",)) == ["ba"]
    assert _pairs(("ba", "ba")) == ["ba"]  # identical duplicates: kept as given
    assert _pairs(("ba", "ab")) == ["ab"]  # both orders: the sorted one (VW 9.11.9)
    assert _pairs(("ab", "ba")) == ["ab"]
    assert _pairs(("ba", "ab", "ba")) == ["ab"]
    assert _pairs(("cc", "ba", "aa")) == ["aa", "ba", "cc"]  # VW sorts the list (parse_args.cc)
    with pytest.raises(ConfigError):
        Interactions(quadratic=("abc",))
    with pytest.raises(ConfigError):
        Interactions(quadratic=("a",))


def test_io_kernel_modules_are_cached_and_nogil():
    """Every function in the io kernel modules is an @njit(cache=True, nogil=True) kernel
    (CONVENTIONS 7); only the table builder runs at import time in Python."""
    import inspect

    from numba.core.registry import CPUDispatcher

    from streamlearn.io import _hash_kernels, _text_kernels

    for mod in (_hash_kernels, _text_kernels):
        for name, obj in vars(mod).items():
            if getattr(obj, "__module__", None) != mod.__name__:
                continue
            if isinstance(obj, CPUDispatcher):
                assert type(obj._cache).__name__ != "NullCache", name
                assert obj.targetoptions.get("nogil") is True, name
            elif inspect.isfunction(obj):
                assert name == "_pow10_tables", f"{mod.__name__}.{name} is not a kernel"
