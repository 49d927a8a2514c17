"""Count Sketch, top-k heap and HyperLogLog kernels (issue 4 parts 1-2 and 7)."""
import numpy as np
import pytest

mmh3 = pytest.importorskip("mmh3")
sk = pytest.importorskip("streamlearn.algos._sketch_kernels")

from streamlearn.algos.mission import Mission  # noqa: E402
from streamlearn.algos.sketch import hll_estimate  # noqa: E402


def _seeds(R, seed=0):
    return Mission(sketch_rows=R, sketch_width=8, sketch_seed=seed).seeds


def _positions(keys, seeds, W):
    R = seeds.shape[0]
    bk = np.empty((len(keys), R), np.int64)
    sg = np.empty((len(keys), R))
    for i, k in enumerate(keys):
        sk.sketch_positions(np.uint32(k), seeds, W, bk[i], sg[i])
    return bk, sg


def test_murmur3_matches_mmh3():
    rng = np.random.default_rng(1)
    keys = np.concatenate([[0, 1, 2, 0xFFFFFFFF, 0x80000000],
                           rng.integers(0, 2**32, 2000)]).astype(np.uint32)
    for seed in (0, 1, 42, 0xDEADBEEF, 0xFFFFFFFF):
        out = np.empty(len(keys), np.uint64)
        sk.murmur3_u32_array(keys, seed, out)
        ref = [mmh3.hash(int(k).to_bytes(4, "little"), seed, signed=False) for k in keys]
        assert out.tolist() == ref


def test_seeds_distinct_per_row_and_role():
    s = _seeds(5)
    assert len(set(s.ravel().tolist())) == 10
    assert not np.array_equal(_seeds(5, 0), _seeds(5, 1))


def test_sketch_linearity_and_exact_single_key():
    rng = np.random.default_rng(2)
    R, W = 5, 64
    seeds = _seeds(R)
    keys = rng.integers(0, 2**32, 300).astype(np.uint32)
    a, b = rng.normal(size=300), rng.normal(size=300)
    S1, S2, S12 = (np.zeros((R, W)) for _ in range(3))
    sk.sketch_add_keys(S1, seeds, keys, a)
    sk.sketch_add_keys(S2, seeds, keys, b)
    sk.sketch_add_keys(S12, seeds, keys, a)
    sk.sketch_add_keys(S12, seeds, keys, b)
    np.testing.assert_allclose(S12, S1 + S2, rtol=0, atol=1e-12)
    # linear map: S = sum_i v_i * (signed indicator of key i) in each row
    bk, sg = _positions(keys, seeds, W)
    ref = np.zeros((R, W))
    for i in range(len(keys)):
        for r in range(R):
            ref[r, bk[i, r]] += sg[i, r] * a[i]
    np.testing.assert_allclose(S1, ref, atol=1e-12)
    # one key alone is recovered exactly; median of R values
    S = np.zeros((R, W))
    sk.sketch_add_keys(S, seeds, keys[:1], np.array([3.25]))
    out = np.empty(1)
    sk.sketch_query_keys(S, seeds, keys[:1], out)
    assert out[0] == 3.25


def test_median_query_even_rows():
    S = np.zeros((4, 1))
    S[:, 0] = [1.0, 5.0, 2.0, 9.0]
    bk = np.zeros(4, np.int64)
    sg = np.ones(4)
    assert sk.sketch_query(S, bk, sg, np.empty(4)) == 3.5
    S3 = np.array([[4.0], [-1.0], [2.0]])
    assert sk.sketch_query(S3, np.zeros(3, np.int64), np.array([1.0, 1.0, -1.0]), np.empty(3)) == -1.0


@pytest.mark.parametrize("R", [1, 2, 3, 4, 5, 6, 7])
def test_median_query_equals_numpy_median(R):
    """QUERY's median (min / max networks for R = 3 and 5, insertion sort otherwise) equals
    np.median over every order of values with ties, signs and zeros."""
    rng = np.random.default_rng(R)
    bk = np.zeros(R, np.int64)
    for _ in range(300):
        v = rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], R) if rng.random() < 0.5 else rng.normal(size=R)
        S = v.reshape(R, 1).copy()
        sg = rng.choice([-1.0, 1.0], R)
        assert sk.sketch_query(S, bk, sg, np.empty(R)) == np.median(sg * v)


def test_heavy_hitter_recovery():
    rng = np.random.default_rng(3)
    p, R, W = 20000, 5, 400
    seeds = _seeds(R)
    keys = np.unique(rng.integers(0, 2**32, p * 2).astype(np.uint32))[:p]
    vals = rng.normal(0, 0.01, p)
    heavy = rng.choice(p, 10, replace=False)
    vals[heavy] = rng.choice([-1, 1], 10) * rng.uniform(5, 10, 10)
    S = np.zeros((R, W))
    sk.sketch_add_keys(S, seeds, keys, vals)
    q = np.empty(p)
    sk.sketch_query_keys(S, seeds, keys, q)
    assert np.max(np.abs(q[heavy] - vals[heavy])) < 0.2
    assert set(np.argsort(-np.abs(q))[:10].tolist()) == set(heavy.tolist())
    # the tail's error is of the order of ||tail||_2 / sqrt(W)
    tail = np.setdiff1d(np.arange(p), heavy)
    assert np.median(np.abs(q[tail] - vals[tail])) < 3 * 0.01 * np.sqrt(p / W)


def test_sign_and_bucket_independent():
    rng = np.random.default_rng(4)
    R, W = 3, 16
    seeds = _seeds(R)
    keys = rng.integers(0, 2**32, 40000).astype(np.uint32)
    bk, sg = _positions(keys, seeds, W)
    for r in range(R):
        # each bucket is hit about uniformly and holds both signs about equally often:
        # colliding features cancel on average (the public code's single hash never did)
        cnt = np.bincount(bk[:, r], minlength=W)
        assert cnt.min() > 0.8 * len(keys) / W
        pos = np.bincount(bk[:, r], weights=(sg[:, r] > 0), minlength=W)
        frac = pos / cnt
        assert np.all(np.abs(frac - 0.5) < 0.05), frac
    # rows are independent of each other
    same = np.mean(bk[:, 0] == bk[:, 1])
    assert abs(same - 1 / W) < 0.01
    assert abs(np.mean(sg[:, 0] == sg[:, 1]) - 0.5) < 0.02


# -- top-k heap ------------------------------------------------------------------------------
class Heap:
    def __init__(self, k):
        T = 8
        while T < 2 * k:
            T *= 2
        self.keys = np.zeros(k, np.uint32)
        self.w = np.zeros(k)
        self.tpos = np.zeros(k, np.int32)
        self.name = np.arange(k, dtype=np.int32)
        self.tbl = np.full(T, -1, np.int32)
        self.size = np.zeros(1, np.int64)
        self.names = np.zeros((k, sk.NAME_BYTES), np.uint8)
        self.name_len = np.zeros(k, np.int32)

    def offer(self, key, val, spans=None, entry=0):
        """The run kernels' offer code (``_offer_class``) on this heap; ``spans``: the entering key's name
        is entry ``entry`` of them (None: no names)."""
        if spans is None:
            e = np.empty(0, np.int64)
            spans = sk.Spans(np.empty(0, np.uint8), e, e, e, e)
        return sk.heap_offer(self.keys, self.w, self.tpos, self.name, self.tbl, self.size, self.names,
                             self.name_len, np.uint32(key), float(val), spans, entry)

    def members(self):
        n = int(self.size[0])
        return dict(zip(self.keys[:n].tolist(), self.w[:n].tolist()))

    def check(self):
        n = int(self.size[0])
        a = np.abs(self.w[:n])
        for i in range(1, n):
            assert a[(i - 1) // 2] <= a[i]
        assert len(set(self.keys[:n].tolist())) == n
        assert np.count_nonzero(self.tbl >= 0) == n
        for s in range(n):
            assert sk.tbl_find(self.tbl, self.keys, self.keys[s]) == s
            assert self.tbl[self.tpos[s]] == s
        assert sorted(self.name.tolist()) == list(range(len(self.name)))


def test_heap_matches_brute_force():
    rng = np.random.default_rng(5)
    k = 24
    h = Heap(k)
    ref = {}
    pool = rng.integers(0, 2**32, 120).astype(np.uint32)
    pool[:40] = np.arange(40)  # consecutive keys cluster in the position map
    for step in range(6000):
        key = int(pool[rng.integers(len(pool))])
        val = float(rng.normal() * rng.choice([0.1, 1, 10]))
        h.offer(key, val)
        if key in ref:
            ref[key] = val
        elif len(ref) < k:
            ref[key] = val
        else:
            kmin = min(ref, key=lambda q: abs(ref[q]))
            if abs(val) > abs(ref[kmin]):
                del ref[kmin]
                ref[key] = val
        if step % 50 == 0:
            h.check()
        assert h.members() == ref
    h.check()


def test_heap_zero_values_and_name_ids():
    h = Heap(4)
    assert h.offer(7, 0.0) == -1  # zeros do not take a slot
    ids = [h.offer(k, v) for k, v in [(1, 1.0), (2, -2.0), (3, 3.0), (4, 0.5)]]
    assert sorted(ids) == [0, 1, 2, 3]
    assert h.offer(1, 5.0) == -1  # a member: updated in place
    new = h.offer(9, 4.0)  # evicts key 4 (|0.5|), takes its name id
    assert new == ids[3]
    assert h.members() == {1: 5.0, 2: -2.0, 3: 3.0, 9: 4.0}
    assert h.offer(10, 1.5) == -1  # |1.5| < min |w| = 2
    h.offer(3, 0.0)  # a member may drop to 0 and stays until evicted
    assert h.members()[3] == 0.0
    h.check()


def test_entering_name_copy_and_truncation():
    """An entering key's ``namespace^name`` (or ``name``) is copied to its name id, at most NAME_BYTES
    bytes with the full length kept; no name known: length 0; an update copies nothing."""
    text = np.frombuffer(b"ns feat" + b"x" * 100, np.uint8)
    h = Heap(2)
    a = np.array
    spans = sk.Spans(text, a([3, 7, -1]), a([7, 107, -1]), a([0, -1, -1]), a([2, -1, -1]))
    n0 = h.offer(11, 1.0, spans, 0)
    assert bytes(h.names[n0, :h.name_len[n0]]) == b"ns^feat"
    n1 = h.offer(12, 2.0, spans, 1)
    assert h.name_len[n1] == 100 and bytes(h.names[n1]) == b"x" * sk.NAME_BYTES
    assert h.offer(12, 3.0, spans, 0) == -1 and h.name_len[n1] == 100  # an update: the name stays
    n2 = h.offer(13, 5.0, spans, 2)  # evicts key 11 (|1.0|) and takes its name id; no name known
    assert n2 == n0 and h.name_len[n2] == 0
    h.check()


def test_hyperloglog_estimate():
    reg = np.zeros(1 << sk.HLL_BITS, np.uint8)
    keys = np.arange(200000, dtype=np.uint32) * np.uint32(2654435761)
    for i, key in enumerate(keys):
        sk.hll_add(reg, key)
        if i + 1 in (100, 5000):
            assert abs(hll_estimate(reg) / (i + 1) - 1) < 0.06
    assert abs(hll_estimate(reg) / len(keys) - 1) < 0.05
    for key in keys[:1000]:  # duplicates do not count
        sk.hll_add(reg, key)
    assert abs(hll_estimate(reg) / len(keys) - 1) < 0.05
