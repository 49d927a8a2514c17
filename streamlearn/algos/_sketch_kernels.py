"""Compiled Count Sketch, top-k heap and minibatch helpers shared by BEAR and MISSION.

Count Sketch (Charikar, Chen & Farach-Colton 2002; BEAR paper Sec. 2): ``R`` rows of ``W``
buckets. Feature ``h`` (its full 32-bit hash) lands in bucket ``bucket_r(h)`` of row ``r`` with
sign ``sign_r(h)``; ADD(h, d) adds ``sign_r(h) * d`` to each row's bucket and QUERY(h) is the
median over rows of ``sign_r(h) * cell``. Bucket and sign come from *independent* hashes:
MurmurHash3 x86_32 of the 4 little-endian key bytes, with a distinct seed per row and per role
(the public reference code derived both from one hash, so colliding features never cancelled).

Top-k heap (BEAR Alg. 2 line 10): an exact min-heap of at most ``k`` members keyed by
``|weight|``; a position map (open addressing, linear probing, backward-shift deletion, no
tombstones) maps a member's hash to its heap slot, so a member is updated in place and is never
duplicated or lost. Each member owns a stable *name id* indexing a fixed ``k x NAME_BYTES``
buffer holding the feature's original ``namespace^name`` (truncated to ``NAME_BYTES`` bytes;
the stored length is the full length so truncation is visible).

The intercept (not in the papers, whose models have none): the constant feature's weight of
each class, ``SketchState.intercept``, outside the sketch and the heap, in every prediction and
stepped like the other coordinates (``DRIVER_HYPER``'s ``const_key``).

HyperLogLog (Flajolet et al. 2007, 2^12 one-byte registers) counts distinct features seen in
constant memory, for the compression factor.

State of a sketch learner, as its kernels take it: :class:`SketchState` (sketch, heap, names,
HyperLogLog, counters) and :class:`Spans` (the batch's feature-name spans). :func:`minibatch_run`
is the one minibatch driver (progressive validation, minibatches of ``b`` labeled rows); each
learner supplies its iteration with :func:`implements_update`.
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import overload

from ..kernels._jit import INNER, KERNEL
from ..kernels._intrinsics import _prefetch
from ._loss_kernels import loss_deriv, loss_value, target

__all__ = [
    "NAME_BYTES", "HLL_BITS", "SOFTMAX", "murmur3_u32_array",
    "sketch_positions", "sketch_query", "sketch_query_keys", "sketch_query_class", "sketch_add_keys",
    "tbl_find", "heap_offer", "hll_add", "build_active", "const_index", "eff_weights",
    "mb_predict", "mb_gradient",
    "SketchState", "Spans", "minibatch_update", "implements_update", "minibatch_run", "DRIVER_HYPER",
]


#: The minibatch driver's hyper-parameters, the first fields of every sketch learner's hyper
#: tuple: loss code (``_loss_kernels``; 3 = softmax for ``--oaa``), step ``eta0``, ``schedule``
#: (0 constant, 1 inverse: ``eta0 * t0 / (t0 + t)``), ``t0``, the minibatch size ``b`` and ``clip``
#: (squared loss: derivatives at the score clipped to the label range; ``--no_clip`` turns it off) and
#: ``const_key``: the constant feature's hash, whose weight (per class) is the intercept kept outside
#: the sketch and the heap and used in every prediction, or -1 (models saved before: the constant
#: is a feature like any other, in the sketch, and in the model only while it is in the heap).
DRIVER_HYPER = ("code", "eta0", "schedule", "t0", "b", "clip", "const_key")


class SketchState(NamedTuple):
    """What a sketch learner knows (BEAR Alg. 2's sketch S and heap, plus bookkeeping).
    ``K`` classes (1 for binary / regression), ``R x W`` sketch, heap of ``k``."""

    sketch: np.ndarray  # float64 (R, W, K): the Count Sketch of each class's weights, classes adjacent
    seeds: np.ndarray  # uint32 (R, 2): [row, 0] bucket seed, [row, 1] sign seed
    hkeys: np.ndarray  # uint32 (K, k): heap members' feature hashes
    hw: np.ndarray  # float64 (K, k): their weights at their last minibatch
    htpos: np.ndarray  # int32 (K, k): heap slot -> position-map slot
    hname: np.ndarray  # int32 (K, k): heap slot -> name id
    htk: np.ndarray  # int64 (T, K): position maps, entries slot << 32 | hash, -1 = empty; classes adjacent
    hsize: np.ndarray  # int64 (K,): heap sizes
    names: np.ndarray  # uint8 (K, k, NAME_BYTES): members' namespace^name
    name_len: np.ndarray  # int32 (K, k): full name lengths
    hll: np.ndarray  # uint8 (2^HLL_BITS,): HyperLogLog registers of the features seen
    counters: np.ndarray  # int64 (4,): t, ring head, ring count, pairs rejected
    lrange: np.ndarray  # float64 (2,): squared loss: label range learned so far
    intercept: np.ndarray  # float64 (K,): the constant feature's weight of each class (const_key >= 0)


class Spans(NamedTuple):
    """A batch's feature-name spans into ``text`` (empty arrays when the reader kept none)."""

    text: np.ndarray  # uint8
    name_start: np.ndarray  # int64 [nnz], -1 = unknown
    name_end: np.ndarray
    ns_start: np.ndarray  # int64 [nnz] or empty: -1 = default namespace
    ns_end: np.ndarray

NAME_BYTES = 64
HLL_BITS = 12
HLL_SEED = np.uint32(0x5EED1E55)  # a uint32, not an int literal: one compiled _murmur3_u32 for all calls
SQUARED = 0
SOFTMAX = 3  # loss code used for --oaa (the binary codes 0..2 come from _loss_kernels)

_M32 = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)
_FIB = np.uint64(0x9E3779B1)


@njit(cache=True, nogil=True, inline="always")
def _rotl(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


@njit(**INNER)
def _murmur3_u32(key, seed):
    """MurmurHash3 x86_32 of the 4 little-endian bytes of ``key`` (uint32) with ``seed``;
    equals ``mmh3.hash(key.to_bytes(4, 'little'), seed, signed=False)``."""
    k = np.uint64(key) & _M32
    k = (k * _C1) & _M32
    k = _rotl(k, 15)
    k = (k * _C2) & _M32
    h = (np.uint64(seed) & _M32) ^ k
    h = _rotl(h, 13)
    h = (h * np.uint64(5) + np.uint64(0xE6546B64)) & _M32
    h ^= np.uint64(4)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    h ^= h >> np.uint64(16)
    return h


@njit(cache=True, nogil=True)
def murmur3_u32_array(keys, seed, out):
    """``out[i] = _murmur3_u32(keys[i], seed)`` (for tests and seeding)."""
    for i in range(keys.shape[0]):
        out[i] = _murmur3_u32(keys[i], seed)


# ------------------------------------------------------------------------------------------
# Count Sketch
# ------------------------------------------------------------------------------------------
@njit(**INNER)
def _sketch_positions(key, seeds, width, bk, sg):
    """Bucket ``bk[r]`` and sign ``sg[r]`` of ``key`` in each row ``r``.

    ``seeds[r, 0]`` seeds the bucket hash, ``seeds[r, 1]`` the sign hash (independent).
    Bucket = ``(h * W) >> 32`` (multiply-shift range reduction), sign = top bit of the other hash.
    """
    W = np.uint64(width)
    for r in range(seeds.shape[0]):
        hb = _murmur3_u32(key, seeds[r, 0])
        hs = _murmur3_u32(key, seeds[r, 1])
        bk[r] = np.int64((hb * W) >> np.uint64(32))
        sg[r] = 1.0 if (hs >> np.uint64(31)) == np.uint64(0) else -1.0


@njit(cache=True, nogil=True, inline="always")
def _med3(a, b, c):
    """The median of three values (min / max: no branches)."""
    return max(min(a, b), min(max(a, b), c))


@njit(cache=True, nogil=True, inline="always")
def _med5(a, b, c, d, e):
    """The median of five values: order the pairs (a, b) and (d, e); the smaller of the two
    minima and the larger of the two maxima each have two values on one side, so neither is the
    median, which is then the median of the other three (min / max: no branches)."""
    lo1 = min(a, b)
    hi1 = max(a, b)
    lo2 = min(d, e)
    hi2 = max(d, e)
    return _med3(max(lo1, lo2), min(hi1, hi2), c)


@njit(cache=True, nogil=True, inline="always")
def _median(tmp, R):
    """Median of ``tmp[:R]`` (R = 3, 5: a min / max network; else sorted in place by insertion;
    even ``R``: mean of the two middle values)."""
    if R == 5:
        return _med5(tmp[0], tmp[1], tmp[2], tmp[3], tmp[4])
    if R == 3:
        return _med3(tmp[0], tmp[1], tmp[2])
    for r in range(1, R):
        v = tmp[r]
        j = r
        while j > 0 and tmp[j - 1] > v:
            tmp[j] = tmp[j - 1]
            j -= 1
        tmp[j] = v
    if R & 1:
        return tmp[R // 2]
    return 0.5 * (tmp[R // 2 - 1] + tmp[R // 2])


@njit(**INNER)
def _sketch_query(sk, bk, sg, tmp):
    """Median over rows of ``sg[r] * sk[r, bk[r]]`` (``sk`` one class's ``R x W`` sketch;
    ``tmp`` a scratch array of length ``R``). Even ``R``: mean of the two middle values."""
    R = bk.shape[0]
    for r in range(R):
        tmp[r] = sg[r] * sk[r, bk[r]]
    return _median(tmp, R)


@njit(cache=True, nogil=True, inline="always")
def _query_c(sketch, c, bk, sg, tmp):
    """QUERY class ``c`` of a learner's class-interleaved sketch ``(R, W, K)``: the median over
    rows of ``sg[r] * sketch[r, bk[r], c]``. A feature's K class cells of a row are adjacent,
    so QUERYing every class of one feature touches R cache-line groups, not R x K lines."""
    R = bk.shape[0]
    for r in range(R):
        tmp[r] = sg[r] * sketch[r, bk[r], c]
    return _median(tmp, R)


@njit(cache=True, nogil=True, inline="always")
def _query_ca(sketch, c, abk, asg, a, tmp):
    """:func:`_query_c` for active feature ``a`` of a minibatch (its buckets ``abk[a]`` and signs
    ``asg[a]``), indexed in place: no array view per call (each view costs an atomic reference
    count increment and decrement, which in the per-(class, feature) loops cost a fifth of the run)."""
    R = abk.shape[1]
    for r in range(R):
        tmp[r] = asg[a, r] * sketch[r, abk[a, r], c]
    return _median(tmp, R)


@njit(cache=True, nogil=True, inline="always")
def _cm_add_query(acc, c, abk, a, g2):
    """Count-min sketch of squared gradients (MISSION ``--step_rule adagrad``, BEAR
    ``--initial_scaling adagrad``; Spring et al. 2019) of class ``c`` (``acc``: ``(R, W, K)``, the weight sketch's buckets
    ``abk[a]``, no signs): ADD ``g2`` to active feature ``a``'s cell in every row, then QUERY its
    estimate, the minimum over the rows."""
    m = np.inf
    for r in range(abk.shape[1]):
        v = acc[r, abk[a, r], c] + g2
        acc[r, abk[a, r], c] = v
        if v < m:
            m = v
    return m


@njit(cache=True, nogil=True, inline="always")
def _add_ca(sketch, c, abk, asg, a, delta):
    """ADD ``delta`` to class ``c`` of active feature ``a`` (as :func:`_query_ca`, no views)."""
    for r in range(abk.shape[1]):
        sketch[r, abk[a, r], c] += asg[a, r] * delta


@njit(**INNER)
def _sketch_add(sk, bk, sg, delta):
    """ADD: ``sk[r, bk[r]] += sg[r] * delta`` for every row."""
    for r in range(bk.shape[0]):
        sk[r, bk[r]] += sg[r] * delta


@njit(cache=True, nogil=True)
def sketch_query_keys(sk, seeds, keys, out):
    """QUERY every key of ``keys`` (uint32) into ``out``."""
    R = seeds.shape[0]
    W = sk.shape[1]
    bk = np.empty(R, np.int64)
    sg = np.empty(R, np.float64)
    tmp = np.empty(R, np.float64)
    for i in range(keys.shape[0]):
        _sketch_positions(keys[i], seeds, W, bk, sg)
        out[i] = _sketch_query(sk, bk, sg, tmp)


@njit(cache=True, nogil=True)
def sketch_query_class(sketch, c, seeds, keys, out):
    """QUERY class ``c`` of a learner's class-interleaved sketch ``(R, W, K)`` for every key
    of ``keys`` (uint32) into ``out``."""
    R = seeds.shape[0]
    W = sketch.shape[1]
    bk = np.empty(R, np.int64)
    sg = np.empty(R, np.float64)
    tmp = np.empty(R, np.float64)
    for i in range(keys.shape[0]):
        _sketch_positions(keys[i], seeds, W, bk, sg)
        out[i] = _query_c(sketch, c, bk, sg, tmp)


@njit(cache=True, nogil=True)
def sketch_add_keys(sk, seeds, keys, deltas):
    """ADD ``deltas[i]`` for every key ``keys[i]``."""
    R = seeds.shape[0]
    W = sk.shape[1]
    bk = np.empty(R, np.int64)
    sg = np.empty(R, np.float64)
    for i in range(keys.shape[0]):
        _sketch_positions(keys[i], seeds, W, bk, sg)
        _sketch_add(sk, bk, sg, deltas[i])


# ------------------------------------------------------------------------------------------
# Top-k heap with a position map (one class's arrays; all views of one class)
#   hkeys[slot] uint32, hw[slot] float64, htpos[slot] int32 (index of its table entry),
#   hname[slot] int32 (stable name id); the position map tbl[T] int64 holds slot << 32 | key
#   (-1: empty), so a look-up compares the key in the entry itself: one cache line per probe,
#   the heap not touched. T a power of two >= 2k, size[0] the number of members. The learners
#   keep the K classes' maps interleaved, (T, K): a feature's home entry is the same in every
#   class's map, so looking it up in all the classes whose heaps hold it reads K adjacent entries
#   (3 lines for K = 20), not one line each; a class's map is the strided view htk[:, c]. Model
#   files keep the maps as htbl, (K, T) int32 heap slots (sketch.py converts).
# ------------------------------------------------------------------------------------------
_LO32 = np.int64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _home(key, tmask):
    return np.int64(((np.uint64(key) * _FIB) & _M32) >> np.uint64(8)) & tmask


@njit(cache=True, nogil=True, inline="always")
def _tbl_entry(slot, key):
    """The position map's entry of a member in heap slot ``slot`` (``slot << 32 | key``)."""
    return (np.int64(slot) << 32) | np.int64(key)


@njit(**INNER)
def _tbl_find(tbl, key):
    """Heap slot of ``key`` or -1."""
    tmask = tbl.shape[0] - 1
    i = _home(key, tmask)
    kk = np.int64(key)
    while True:
        e = tbl[i]
        if e < 0:
            return np.int64(-1)
        if (e & _LO32) == kk:
            return e >> 32
        i = (i + 1) & tmask


@njit(cache=True, nogil=True, inline="always")
def _tbl_find_c(htbl, c, key):
    """:func:`_tbl_find` in class ``c``'s table of the interleaved ``(T, K)`` array (indexed in place: no
    views per call)."""
    tmask = htbl.shape[0] - 1
    i = _home(key, tmask)
    kk = np.int64(key)
    while True:
        e = htbl[i, c]
        if e < 0:
            return np.int64(-1)
        if (e & _LO32) == kk:
            return e >> 32
        i = (i + 1) & tmask


@njit(**INNER)
def _tbl_insert(tbl, hkeys, htpos, slot):
    tmask = tbl.shape[0] - 1
    i = _home(hkeys[slot], tmask)
    while tbl[i] >= 0:
        i = (i + 1) & tmask
    tbl[i] = _tbl_entry(slot, hkeys[slot])
    htpos[slot] = i


@njit(**INNER)
def _tbl_delete(tbl, htpos, e):
    """Remove table entry ``e`` by backward-shift deletion (no tombstones)."""
    tmask = tbl.shape[0] - 1
    i = e
    tbl[i] = -1
    j = i
    while True:
        j = (j + 1) & tmask
        x = tbl[j]
        if x < 0:
            return
        home = _home(x & _LO32, tmask)
        # entry j may stay if its home lies cyclically in (i, j]
        if i <= j:
            if i < home <= j:
                continue
        else:
            if home > i or home <= j:
                continue
        tbl[i] = x
        htpos[x >> 32] = i
        tbl[j] = -1
        i = j


@njit(cache=True, nogil=True, inline="always")
def _heap_put(hkeys, hw, htpos, hname, tbl, i, key, w, tp, nm):
    """Heap slot ``i`` holds the entry (key, weight, position-map slot, name); the map points at it."""
    hkeys[i], hw[i], htpos[i], hname[i] = key, w, tp, nm
    tbl[tp] = _tbl_entry(i, key)


@njit(**INNER)
def _sift_up(hkeys, hw, htpos, hname, tbl, i):
    """Restore the min-heap order (by ``|hw|``) above entry ``i``, whose weight may have shrunk: the
    entry is carried up in a hole (each level moves its parent down one slot, not a swap of two)."""
    key, w, tp, nm = hkeys[i], hw[i], htpos[i], hname[i]
    aw = abs(w)
    while i > 0:
        p = (i - 1) >> 1
        if not aw < abs(hw[p]):
            break
        _heap_put(hkeys, hw, htpos, hname, tbl, i, hkeys[p], hw[p], htpos[p], hname[p])
        i = p
    _heap_put(hkeys, hw, htpos, hname, tbl, i, key, w, tp, nm)


@njit(**INNER)
def _sift_down(hkeys, hw, htpos, hname, tbl, i, n):
    """Restore the min-heap order (by ``|hw|``, ``n`` entries) below entry ``i``, whose weight may
    have grown: carried down in a hole, towards the smaller child."""
    key, w, tp, nm = hkeys[i], hw[i], htpos[i], hname[i]
    aw = abs(w)
    while True:
        l = 2 * i + 1
        if l >= n:
            break
        m = l
        if l + 1 < n and abs(hw[l + 1]) < abs(hw[l]):
            m = l + 1
        if not abs(hw[m]) < aw:
            break
        _heap_put(hkeys, hw, htpos, hname, tbl, i, hkeys[m], hw[m], htpos[m], hname[m])
        i = m
    _heap_put(hkeys, hw, htpos, hname, tbl, i, key, w, tp, nm)


#: how many active features ahead :func:`_offer_class` prefetches a member's heap lines
_HEAP_AHEAD = 6


@njit(**INNER)
def _offer_class(c, hkeys, hw, htpos, hname, tbl, size, names, name_len, akeys, aocc, V, keep, slot, aconst,
                 text, name_start, name_end, ns_start, ns_end, ev, nev):
    """Offer the active features ``akeys`` with weights ``V[:, c]`` to class ``c``'s heap (BEAR Alg. 2 line
    10): the heap's one offer code, which the run kernels (:func:`_offer_active_map`, once per class and
    minibatch) and the tests (:func:`heap_offer`, one key) call.

    The heap is one class's arrays (1-D views, ``tbl`` a strided one; ``names`` ``(k, NAME_BYTES)``, ``size[0]``
    its size). A member
    gets its weight replaced and is re-sifted; ``keep[c, a]`` says ``a`` was a member when its slot
    ``slot[c, a]`` was found (used while that slot still holds it, else looked up again); the others are
    offered without a look-up. A non-member enters if the heap is not full (and its weight is not 0) or if
    its ``|weight|`` beats the smallest member's, which is evicted and whose name id it takes; the entering
    feature's ``namespace^name`` (its first occurrence ``aocc[a]`` in the spans ``text``, ``name_start``,
    ...; empty spans: no name, length 0) is copied to that name id: at most ``NAME_BYTES`` bytes, the full
    length in ``name_len`` (so a reader can tell a truncated name). The constant feature (``aconst``, -1:
    none) is not offered. Each change of membership is appended to ``ev`` from ``nev`` on (``c << 33 |
    1 << 32 | hash``: entered; without the ``1 << 32``: evicted); returns the new ``nev``.

    Written out in one function, no helper taking the heap's arrays per member but the sifts and the
    position map's insert and delete (rare): each call passes its arrays by value, an atomic reference
    count increment and decrement each, which numba does not prune in functions with several ways out or
    calls (per-member calls were a quarter of MISSION's run kernel samples on 20 Newsgroups ``--oaa 20``)."""
    nA = akeys.shape[0]
    k = hkeys.shape[0]
    L = names.shape[1]
    last = nA - 1
    last_slot = max(k - 1, 0)
    for a in range(nA):
        # the heap lines a later member's update will read (its slot, parent, children): a member's
        # update is a chain of dependent reads in heaps larger than the core's caches. Asked for every
        # feature, without a test of its membership (a branch on random data): a non-member's slot -1
        # asks for the root's lines, in cache
        s2 = max(slot[c, min(a + _HEAP_AHEAD, last)], 0)
        _prefetch(hw, s2)
        _prefetch(hkeys, s2)
        _prefetch(hw, (s2 - 1) >> 1)
        _prefetch(hw, min(2 * s2 + 1, last_slot))
        if a == aconst:
            continue
        v = V[a, c]
        if keep[c, a]:  # a member when its slot was found: updated, if it still is one
            s = slot[c, a]
            if hkeys[s] != akeys[a]:  # moved by a sift or evicted since
                s = _tbl_find(tbl, akeys[a])
            if s >= 0:
                # its weight replaced, the heap order restored: a sift is entered only when the entry must
                # move (its parent now heavier, or a child lighter), as most re-sifts of a member move nothing
                n = size[0]
                old = abs(hw[s])
                hw[s] = v
                av = abs(v)
                if av < old:
                    if s > 0 and av < abs(hw[(s - 1) >> 1]):
                        _sift_up(hkeys, hw, htpos, hname, tbl, s)
                elif av > old:
                    l = 2 * s + 1
                    if l < n and (abs(hw[l]) < av or (l + 1 < n and abs(hw[l + 1]) < av)):
                        _sift_down(hkeys, hw, htpos, hname, tbl, s, n)
                continue
        if v == 0.0 or k == 0 or (size[0] >= k and abs(v) <= abs(hw[0])):
            continue  # zeros take no slot; a full heap keeps its members against a weight no heavier
        n = size[0]
        key = akeys[a]
        if n < k:
            hkeys[n] = key
            hw[n] = v
            _tbl_insert(tbl, hkeys, htpos, n)
            size[0] = n + 1
            nid = hname[n]  # slots >= size hold the free name ids; the id moves with the element
            _sift_up(hkeys, hw, htpos, hname, tbl, n)
        else:
            ev[nev] = (np.int64(c) << 33) | np.int64(hkeys[0])  # the member a full heap evicts
            nev += 1
            _tbl_delete(tbl, htpos, htpos[0])
            hkeys[0] = key
            hw[0] = v
            root = np.int64(0)  # not the literal 0: that would compile another _tbl_insert and _sift_down
            _tbl_insert(tbl, hkeys, htpos, root)
            nid = hname[0]
            _sift_down(hkeys, hw, htpos, hname, tbl, root, n)
        ev[nev] = (np.int64(c) << 33) | (np.int64(1) << 32) | np.int64(key)
        nev += 1
        e = aocc[a]  # the name: entry e's namespace^name
        pos = 0
        if name_start.shape[0] > 0 and name_start[e] >= 0:
            if ns_start.shape[0] > 0 and ns_start[e] >= 0:
                for t in range(ns_start[e], ns_end[e]):
                    if pos < L:
                        names[nid, pos] = text[t]
                    pos += 1
                if pos < L:
                    names[nid, pos] = 94  # '^'
                pos += 1
            for t in range(name_start[e], name_end[e]):
                if pos < L:
                    names[nid, pos] = text[t]
                pos += 1
        name_len[nid] = pos
    return nev


# ------------------------------------------------------------------------------------------
# HyperLogLog
# ------------------------------------------------------------------------------------------
@njit(**INNER)
def _hll_add(reg, key):
    """Add a key to the HyperLogLog registers ``reg`` (uint8, length 2**HLL_BITS)."""
    x = _murmur3_u32(key, HLL_SEED)
    idx = np.int64(x >> np.uint64(32 - HLL_BITS))
    w = (x << np.uint64(HLL_BITS)) & _M32
    rank = 1
    bit = np.uint64(1) << np.uint64(31)
    while rank <= 32 - HLL_BITS and (w & bit) == np.uint64(0):
        rank += 1
        w = (w << np.uint64(1)) & _M32
    if rank > reg[idx]:
        reg[idx] = rank


# ------------------------------------------------------------------------------------------
# Minibatch helpers (BEAR Alg. 2 lines 2-4, 8; MISSION uses the same)
# ------------------------------------------------------------------------------------------
@njit(**INNER)
def _build_active(offsets, indices, mb, nmb, seeds, width):
    """Active set A_t of the minibatch (examples ``mb[:nmb]``), in order of first appearance.

    Returns ``(akeys, aocc, loc, abk, asg)``: the distinct hashes, the entry index of each
    one's first occurrence (for its name), ``loc[k]`` = active index of the ``k``-th entry of
    the minibatch (entries of ``mb[0]``, then ``mb[1]``, ...), and each active feature's
    buckets and signs.
    """
    tot = 0
    for q in range(nmb):
        i = mb[q]
        tot += offsets[i + 1] - offsets[i]
    T = 8
    while T < 2 * tot:
        T *= 2
    tmask = T - 1
    tbl = np.full(T, -1, np.int64)
    akeys_full = np.empty(tot, np.uint32)
    aocc_full = np.empty(tot, np.int64)
    loc = np.empty(tot, np.int64)
    nA = 0
    e = 0
    for q in range(nmb):
        i = mb[q]
        for k in range(offsets[i], offsets[i + 1]):
            key = indices[k]
            j = _home(key, tmask)
            while True:
                a = tbl[j]
                if a < 0:
                    tbl[j] = nA
                    akeys_full[nA] = key
                    aocc_full[nA] = k
                    loc[e] = nA
                    nA += 1
                    break
                if akeys_full[a] == key:
                    loc[e] = a
                    break
                j = (j + 1) & tmask
            e += 1
    akeys = akeys_full[:nA].copy()
    aocc = aocc_full[:nA].copy()
    R = seeds.shape[0]
    abk = np.empty((nA, R), np.int64)
    asg = np.empty((nA, R), np.float64)
    for a in range(nA):
        _sketch_positions(akeys[a], seeds, width, abk[a], asg[a])
    return akeys, aocc, loc, abk, asg


@njit(**INNER)
def _const_index(akeys, const_key):
    """The active index of the constant feature (``const_key``) in ``akeys``, or -1 (absent, or
    ``const_key`` -1: no intercept kept apart)."""
    if const_key < 0:
        return -1
    for a in range(akeys.shape[0]):
        if np.int64(akeys[a]) == const_key:
            return a
    return -1


@njit(cache=True, nogil=True, inline="always")
def _prefetch_cells(sketch, abk, a):
    """Prefetch every row's K class cells of active feature ``a`` (``abk``: buckets) in ``sketch``
    (the weights, or a count-min of the same shape), one request per cache line (8 doubles)."""
    R = sketch.shape[0]
    W = sketch.shape[1]
    K = sketch.shape[2]
    for r in range(R):
        base = (r * W + abk[a, r]) * K
        for c in range(0, K, 8):
            _prefetch(sketch, base + c)  # flat index: the sketch is C-contiguous
        _prefetch(sketch, base + K - 1)


@njit(**INNER)
def _prefetch_active(sketch, abk):
    """Prefetch the cells of every active feature (:func:`_prefetch_cells`)."""
    for a in range(abk.shape[0]):
        _prefetch_cells(sketch, abk, a)


@njit(cache=True, nogil=True, inline="always")
def _query_all(sketch, abk, asg, a, tmp, out, row):
    """QUERY every class of active feature ``a`` into ``out[row, :K]`` (each value as :func:`_query_ca`;
    5 rows, the default: the median network over the classes' adjacent cells, a loop the compiler
    vectorises; other row counts one class at a time, which compiles less)."""
    R = abk.shape[1]
    K = sketch.shape[2]
    if R == 5:
        b0, b1, b2, b3, b4 = abk[a, 0], abk[a, 1], abk[a, 2], abk[a, 3], abk[a, 4]
        s0, s1, s2, s3, s4 = asg[a, 0], asg[a, 1], asg[a, 2], asg[a, 3], asg[a, 4]
        for c in range(K):
            out[row, c] = _med5(s0 * sketch[0, b0, c], s1 * sketch[1, b1, c], s2 * sketch[2, b2, c],
                                s3 * sketch[3, b3, c], s4 * sketch[4, b4, c])
    else:
        for c in range(K):
            out[row, c] = _query_ca(sketch, c, abk, asg, a, tmp)


#: how many active features ahead :func:`_eff_weights_map` prefetches the sketch cells and position-map entries
_EFF_AHEAD = 3


@njit(**INNER)
def _eff_weights_map(sketch, htbl, akeys, abk, asg, amask, beta, inheap, slot, tmp, intercept, aconst):
    """Effective weights on A_t (Alg. 2 line 3): QUERY for members of the class's top-k, 0 for the others
    (``beta``, ``inheap``, ``slot`` are ``K x nA``); the constant feature (active index ``aconst``, -1:
    none) has the intercept, always in the model. Given each active feature's class mask ``amask[a]`` (bit
    c: class c's heap holds it; from a class membership map, MISSION's :mod:`._mission_kernels`):
    only those classes' position maps are looked up; ``amask`` empty: every class's. ``slot[c, a]``
    receives the member's heap slot (-1: none), which :func:`_offer_active_map` uses."""
    K = sketch.shape[2]
    nA = akeys.shape[0]
    T = htbl.shape[0]
    every = amask.shape[0] == 0
    vq = np.empty((1, K), np.float64)
    for a in range(nA):
        if a + _EFF_AHEAD < nA:  # a later feature's sketch cells and position-map entries
            a2 = a + _EFF_AHEAD
            _prefetch_cells(sketch, abk, a2)
            if every or amask[a2] != np.uint64(0):  # its home entries of every class: adjacent
                base = _home(akeys[a2], T - 1) * K
                for c in range(0, K, 8):
                    _prefetch(htbl, base + c)
                _prefetch(htbl, base + K - 1)
        if a == aconst:
            for c in range(K):
                inheap[c, a] = True
                beta[c, a] = intercept[c]
                slot[c, a] = -1  # not a heap member
            continue
        m = np.uint64(0)
        if not every:
            for c in range(K):
                slot[c, a] = -1
                inheap[c, a] = False
                beta[c, a] = 0.0
            m = amask[a]
            if m == np.uint64(0):
                continue
        _query_all(sketch, abk, asg, a, tmp, vq, 0)  # every class's weight at once (vectorised), the members' kept
        if every:
            for c in range(K):
                s = _tbl_find_c(htbl, c, akeys[a])
                slot[c, a] = s
                inheap[c, a] = s >= 0
                beta[c, a] = vq[0, c] if s >= 0 else 0.0
            continue
        while m != np.uint64(0):  # the classes whose heaps hold it: the mask's set bits, lowest first
            c = np.int64(trailing_zeros(m))
            m &= m - np.uint64(1)
            s = _tbl_find_c(htbl, c, akeys[a])
            slot[c, a] = s
            if s >= 0:
                inheap[c, a] = True
                beta[c, a] = vq[0, c]


@njit(**INNER)
def _offer_active_map(state, akeys, aocc, abk, asg, spans, tmp, beta, keep, slot, aconst, ev):
    """BEAR Alg. 2 lines 7 and 10 (MISSION's offers too): re-QUERY every class's weights of the active set
    A_t (``akeys``, first occurrences ``aocc``, buckets ``abk`` and signs ``asg``; a feature's classes at
    once, :func:`_query_all`) and offer them to each class's heap (:func:`_offer_class`, one call a class; a
    feature entering the heap takes its name from ``spans``). ``keep[c, a]``: ``a`` was a member of class ``c``'s heap when the minibatch's
    weights were QUERYed (:func:`_eff_weights_map`; the others are offered without a look-up), its heap
    slot then in ``slot[c, a]``, used while it still holds the member (an offer before may have moved or
    evicted it: then looked up again). With ``beta`` non-empty, ``beta[c, a]`` receives the new weight
    where ``keep[c, a]`` (else 0). The constant feature (active index ``aconst``, -1: none) has the
    intercept and is not offered. Each change of membership is written to ``ev`` (in order;
    ``c << 33 | 1 << 32 | hash``: the feature entered class c's heap, without the ``1 << 32``: it left),
    for a class membership map (:mod:`._mission_kernels`); returns the number of changes."""
    sketch = state.sketch
    K = sketch.shape[2]
    nA = akeys.shape[0]
    V = np.empty((nA, K), np.float64)
    for a in range(nA):
        if a == aconst:
            for c in range(K):
                V[a, c] = state.intercept[c]
            continue
        _query_all(sketch, abk, asg, a, tmp, V, a)
    if beta.shape[1] > 0:
        for c in range(K):
            for a in range(nA):
                beta[c, a] = V[a, c] if keep[c, a] else 0.0
    nev = np.int64(0)  # not the literal 0: that would compile a second _offer_class
    text = spans.text
    name_start = spans.name_start
    name_end = spans.name_end
    ns_start = spans.ns_start
    ns_end = spans.ns_end
    for c in range(K):
        nev = _offer_class(c, state.hkeys[c], state.hw[c], state.htpos[c], state.hname[c], state.htk[:, c],
                           state.hsize[c:c + 1], state.names[c], state.name_len[c], akeys, aocc, V, keep, slot, aconst,
                           text, name_start, name_end, ns_start, ns_end, ev, nev)
    return nev


@njit(**INNER)
def _predict_example(offsets, indices, values, i, sketch, seeds, htbl, p, bk, sg, tmp, intercept, const_key):
    """Raw scores ``p[c]`` of example ``i``: sum over its features that are in class ``c``'s
    top-k of the QUERYed weight times the value, plus the intercept times the constant
    feature's value (the model's prediction rule)."""
    K = sketch.shape[2]
    W = sketch.shape[1]
    for c in range(K):
        p[c] = 0.0
    for k in range(offsets[i], offsets[i + 1]):
        key = indices[k]
        if np.int64(key) == const_key:
            for c in range(K):
                p[c] += intercept[c] * values[k]
            continue
        computed = False
        for c in range(K):
            if _tbl_find_c(htbl, c, key) >= 0:
                if not computed:
                    _sketch_positions(key, seeds, W, bk, sg)
                    computed = True
                p[c] += _query_c(sketch, c, bk, sg, tmp) * values[k]


@njit(**INNER)
def _mb_predict(offsets, values, mb, nmb, loc, beta, P):
    """Scores ``P[q, c]`` of the minibatch examples under weights ``beta`` (``K x nA``)."""
    K = beta.shape[0]
    e = 0
    for q in range(nmb):
        i = mb[q]
        for c in range(K):
            P[q, c] = 0.0
        for k in range(offsets[i], offsets[i + 1]):
            a = loc[e]
            x = values[k]
            for c in range(K):
                P[q, c] += beta[c, a] * x
            e += 1


@njit(**INNER)
def _mb_loss_and_pred(code, p, K, label, out):
    """Loss of scores ``p`` and the reported prediction (class id 1..K for softmax).
    ``out = [prediction, loss]``; loss NaN when ``label`` is NaN."""
    if code == SOFTMAX:
        best = 0
        mx = p[0]
        for c in range(1, K):
            if p[c] > mx:
                mx = p[c]
                best = c
        out[0] = best + 1.0
        if math.isnan(label):
            out[1] = math.nan
            return
        z = 0.0
        for c in range(K):
            z += math.exp(p[c] - mx)
        y = int(label) - 1
        out[1] = mx + math.log(z) - p[y]
        return
    out[0] = p[0]
    if math.isnan(label):
        out[1] = math.nan
        return
    out[1] = loss_value(code, p[0], target(code, label))


@njit(**INNER)
def _record(code, p, K, label, i, out, pred_out, loss_out, score_out):
    """Report row ``i``'s prediction and loss from its class scores ``p`` (and the scores, if
    ``score_out`` has rows)."""
    _mb_loss_and_pred(code, p, K, label, out)
    pred_out[i] = out[0]
    loss_out[i] = out[1]
    if score_out.shape[0] > 0:
        for c in range(K):
            score_out[i, c] = p[c]


@njit(**INNER)
def _mb_gradient(code, offsets, values, labels, weights, mb, nmb, loc, P, G, lrange, clip):
    """Mean minibatch gradient (Alg. 2 lines 4 and 8): ``G[c, a]`` = (1/b) sum_i w_i
    dl_i/dp_c x_ia, with ``G`` zeroed first. Softmax: dl/dp_c = pi_c - [y = c].

    Squared loss: ``lrange = [min, max]`` of the labels learned so far (starting at [0, 0],
    extended by this minibatch's labels); with ``clip`` the derivative is taken at the score
    clipped to that range, as VW clips squared-loss predictions to its label range. It only
    binds when a score leaves the labels' range, and keeps SGD on the sketch from running away
    geometrically on extreme feature values (1e30): the step grows at most linearly. Returns
    whether the clip bound for some example (then ``clip=False`` gives a different ``G``)."""
    K = G.shape[0]
    nA = G.shape[1]
    for c in range(K):
        for a in range(nA):
            G[c, a] = 0.0
    bound = False
    if nmb == 0:
        return bound
    if code == SQUARED:
        for q in range(nmb):
            y = labels[mb[q]]
            if y < lrange[0]:
                lrange[0] = y
            if y > lrange[1]:
                lrange[1] = y
    inv = 1.0 / nmb
    coef = np.empty(K, np.float64)
    e = 0
    for q in range(nmb):
        i = mb[q]
        imp = weights[i] * inv
        if code == SOFTMAX:
            mx = P[q, 0]
            for c in range(1, K):
                if P[q, c] > mx:
                    mx = P[q, c]
            z = 0.0
            for c in range(K):
                coef[c] = math.exp(P[q, c] - mx)
                z += coef[c]
            y = int(labels[i]) - 1
            for c in range(K):
                coef[c] = imp * (coef[c] / z - (1.0 if c == y else 0.0))
        else:
            pq = P[q, 0]
            if clip and code == SQUARED:
                if pq < lrange[0] or pq > lrange[1]:
                    bound = True
                pq = min(max(pq, lrange[0]), lrange[1])
            coef[0] = imp * loss_deriv(code, pq, target(code, labels[i]))
        for k in range(offsets[i], offsets[i + 1]):
            a = loc[e]
            x = values[k]
            for c in range(K):
                G[c, a] += coef[c] * x
            e += 1
    return bound


@njit(**INNER)
def _step_size(eta0, schedule, t0, t):
    """Step of iteration ``t``: constant ``eta0`` or ``eta0 * t0 / (t0 + t)`` (the paper's
    ``eta0' / (t + T0)`` with ``eta0' = eta0 * T0``, so ``eta0`` is always the first step)."""
    if schedule == 0:
        return eta0
    return eta0 * t0 / (t0 + t)


def minibatch_update(offsets, indices, values, labels, weights, mb, nmb, spans, state, extra, hyper, eta, P0):
    """One learner iteration on the minibatch ``mb[:nmb]`` with step ``eta``; returns ``extra``
    (the learner's own state, possibly reallocated). ``P0[q, c]`` receives example ``mb[q]``'s
    class scores under the weights before the step (Alg. 2 line 3's effective weights: the
    model's prediction, which the driver reports). Only a declaration: each learner binds it
    for its hyper-parameter tuple with :func:`implements_update`."""
    raise NotImplementedError("minibatch_update runs only inside compiled kernels")


def implements_update(hyper_type):
    """Decorator of a learner's ``@njit`` iteration kernel (same arguments as
    :func:`minibatch_update`): :func:`minibatch_run` calls it for runs whose ``hyper`` is a
    ``hyper_type``. Resolved when the driver is compiled, so the driver stays cacheable (a
    kernel passed as an argument would not be)."""
    def bind(kernel):
        @overload(minibatch_update, jit_options={k: v for k, v in INNER.items() if k != "cache"})
        def _typed(offsets, indices, values, labels, weights, mb, nmb, spans, state, extra, hyper, eta, P0):
            if getattr(hyper, "instance_class", None) is hyper_type:
                return kernel.py_func
            return None
        return kernel
    return bind


# inline: compiled into each learner's run kernel, so that its cache follows the learner's
# module (a separately cached driver would keep a stale copy of an edited minibatch_update)
@njit(cache=True, nogil=True, inline="always")
def minibatch_run(offsets, indices, values, labels, weights, spans, state, extra, hyper,
                  learn, flush, skip, pred_out, loss_out, pending_out, score_out):
    """The minibatch driver of the sketch learners: progressive validation over the batch.

    Every example is predicted with the model as it is before the update of the minibatch it
    belongs to; labeled examples (when ``learn``) are collected into minibatches of ``hyper.b``
    and a full minibatch is learned at once by the learner's :func:`minibatch_update` with the
    step of ``hyper.eta0``, ``hyper.schedule``, ``hyper.t0`` (:func:`step_size`). Rows ``< skip``
    are the buffered start of a minibatch, already predicted by an earlier call (not
    recomputed). With ``flush`` a final partial minibatch is learned too; otherwise its rows are
    written to ``pending_out``. ``state.counters[0]`` is the iteration count t. If
    ``score_out`` has rows (``(n, K)``; ``(0, K)`` for none) each predicted row's raw class
    scores go there too (``--probabilities``: their softmax).
    Returns ``(examples learned, rows pending, extra)``.

    A row that will be learned is not predicted on its own: the model does not change before its
    minibatch's update, whose scores at the weights before the step (``P0``, the same sums in the
    same order) are its prediction; rows still pending at the end of the call are predicted
    then. This halves the sketch and heap look-ups of a learned example.
    """
    n = labels.shape[0]
    sketch = state.sketch
    K = sketch.shape[2]
    R = sketch.shape[0]
    code = hyper.code
    mb = np.empty(n + 1, np.int64)
    nmb = 0
    learned = 0
    p = np.empty(K, np.float64)
    bk = np.empty(R, np.int64)
    sg = np.empty(R, np.float64)
    tmp = np.empty(R, np.float64)
    out = np.empty(2, np.float64)
    seeds = state.seeds
    htbl = state.htk
    intercept = state.intercept
    P0 = np.empty((min(hyper.b, n) + 1, K), np.float64)
    for i in range(n + 1):
        last = i == n  # one extra round: learn a final partial minibatch when flushing
        if not last:
            labeled = learn and not math.isnan(labels[i])
            if i >= skip and not labeled:  # rows < skip were predicted and recorded by an earlier call
                _predict_example(offsets, indices, values, i, sketch, seeds, htbl, p, bk, sg, tmp, intercept,
                                 hyper.const_key)
                _record(code, p, K, labels[i], i, out, pred_out, loss_out, score_out)
            if labeled:
                mb[nmb] = i
                nmb += 1
        if nmb >= hyper.b or (last and learn and flush and nmb > 0):
            eta = _step_size(hyper.eta0, hyper.schedule, hyper.t0, state.counters[0])
            extra = minibatch_update(offsets, indices, values, labels, weights, mb, nmb, spans, state,
                                     extra, hyper, eta, P0)
            for q in range(nmb):
                if mb[q] >= skip:
                    _record(code, P0[q], K, labels[mb[q]], mb[q], out, pred_out, loss_out, score_out)
            state.counters[0] += 1
            learned += nmb
            nmb = 0
    for q in range(nmb):
        i = mb[q]
        pending_out[q] = i
        if i >= skip:  # learned by a later call, from this model
            _predict_example(offsets, indices, values, i, sketch, seeds, htbl, p, bk, sg, tmp, intercept,
                                 hyper.const_key)
            _record(code, p, K, labels[i], i, out, pred_out, loss_out, score_out)
    return learned, nmb, extra


@njit(**KERNEL)
def sketch_positions(key, seeds, width, bk, sg):
    """:func:`_sketch_positions` callable from Python (tests, benchmarks)."""
    return _sketch_positions(key, seeds, width, bk, sg)


@njit(**KERNEL)
def sketch_query(sk, bk, sg, tmp):
    """:func:`_sketch_query` callable from Python (tests, benchmarks)."""
    return _sketch_query(sk, bk, sg, tmp)


@njit(**INNER)
def _packed_table(tbl, hkeys):
    """A model file's position maps ``tbl`` ``(K, T)`` (heap slot or -1) of the heap keys ``hkeys``
    ``(K, k)`` as the kernels' ``(T, K)`` (``slot << 32 | hash``, -1), for the Python-callable entries
    below (tests, benchmarks)."""
    K, T = tbl.shape
    out = np.empty((T, K), np.int64)
    for c in range(K):
        for i in range(T):
            s = tbl[c, i]
            out[i, c] = -1 if s < 0 else _tbl_entry(s, hkeys[c, s])
    return out


@njit(**KERNEL)
def tbl_find(tbl, hkeys, key):
    """:func:`_tbl_find` callable from Python (tests, benchmarks) on a model file's arrays (``tbl``: heap
    slot or -1; ``hkeys``: the heap's keys)."""
    return _tbl_find(_packed_table(tbl.reshape(1, tbl.shape[0]), hkeys.reshape(1, hkeys.shape[0]))[:, 0], key)


@njit(**KERNEL)
def heap_offer(hkeys, hw, htpos, hname, tbl, size, names, name_len, key, val, spans, entry):
    """Offer ``(key, val)`` to one heap, kept in a model file's arrays (``tbl``: heap slot or -1), through
    :func:`_offer_class`, the run kernels' offer code (tests, benchmarks), its position map packed as the
    kernels keep it (converted there and back): its slot, if a member, from :func:`_tbl_find`; an entering
    key's name from entry ``entry`` of ``spans`` (empty spans: none). Returns the new member's name id, or
    -1 if ``key`` did not newly enter (an update, or refused)."""
    k = hkeys.shape[0]
    ptbl = _packed_table(tbl.reshape(1, tbl.shape[0]), hkeys.reshape(1, k))[:, 0]  # (a strided view, as the runs')
    akeys = np.empty(1, np.uint32)
    akeys[0] = key
    aocc = np.empty(1, np.int64)
    aocc[0] = entry
    V = np.empty((1, 1), np.float64)
    V[0, 0] = val
    s = _tbl_find(ptbl, akeys[0])
    keep = np.empty((1, 1), np.bool_)
    keep[0, 0] = s >= 0
    slot = np.empty((1, 1), np.int64)
    slot[0, 0] = s
    ev = np.empty(2, np.int64)
    nev = _offer_class(np.int64(0), hkeys, hw, htpos, hname, ptbl, size, names, name_len, akeys, aocc, V, keep, slot,
                       np.int64(-1), spans.text, spans.name_start, spans.name_end, spans.ns_start, spans.ns_end, ev,
                       np.int64(0))
    for i in range(tbl.shape[0]):
        tbl[i] = -1 if ptbl[i] < 0 else np.int32(ptbl[i] >> 32)
    if nev > 0 and (ev[nev - 1] >> 32) & 1:
        return np.int64(hname[_tbl_find(ptbl, akeys[0])])
    return np.int64(-1)


@njit(**KERNEL)
def hll_add(reg, key):
    """:func:`_hll_add` callable from Python (tests, benchmarks)."""
    return _hll_add(reg, key)


@njit(**KERNEL)
def build_active(offsets, indices, mb, nmb, seeds, width):
    """:func:`_build_active` callable from Python (tests, benchmarks)."""
    return _build_active(offsets, indices, mb, nmb, seeds, width)


@njit(**KERNEL)
def const_index(akeys, const_key):
    """:func:`_const_index` callable from Python (tests, benchmarks)."""
    return _const_index(akeys, const_key)


@njit(**KERNEL)
def eff_weights(sketch, htbl, hkeys, akeys, abk, asg, beta, inheap, tmp, intercept, aconst):
    """:func:`_eff_weights_map` (every class's position map looked up) callable from Python (tests,
    benchmarks) on a model file's heap arrays (``htbl``: heap slot or -1; ``hkeys``: the heaps' keys)."""
    slot = np.empty(beta.shape, np.int64)
    _eff_weights_map(sketch, _packed_table(htbl, hkeys), akeys, abk, asg, np.empty(0, np.uint64), beta, inheap, slot, tmp, intercept,
                     aconst)


@njit(**KERNEL)
def mb_predict(offsets, values, mb, nmb, loc, beta, P):
    """:func:`_mb_predict` callable from Python (tests, benchmarks)."""
    return _mb_predict(offsets, values, mb, nmb, loc, beta, P)


@njit(**KERNEL)
def mb_gradient(code, offsets, values, labels, weights, mb, nmb, loc, P, G, lrange, clip=True):
    """:func:`_mb_gradient` callable from Python (tests, benchmarks)."""
    return _mb_gradient(code, offsets, values, labels, weights, mb, nmb, loc, P, G, lrange, clip)
