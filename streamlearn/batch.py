"""The one batch type that every reader yields and every learner consumes.

A :class:`Batch` is a block of examples in CSR form. Kernels take exactly these arrays, with
these names and in this order: ``offsets, indices, values, labels, weights``.

Conventions
-----------
* ``indices`` hold the **full 32-bit VW-compatible feature hash** (``uint32``). Learners mask
  it with ``(1 << bits) - 1`` themselves (VW masks at the learner too); count-sketch learners
  index by the full hash.
* ``values`` are ``float64`` (namespace weights already multiplied in).
* ``labels`` are ``float64``; ``NaN`` marks an unlabeled example (predicted, never learned).
* ``weights`` are the importance weights (``float64``, default 1).
* ``lines`` is the 1-based line (or row) number of each example in ``source``.
* Optional tag spans (``tag_start``/``tag_end``, ``-1`` = no tag) and feature-name spans
  (``name_start``/``name_end``, ``ns_start``/``ns_end``, ``-1`` = unknown) point into
  ``text``, the raw bytes the batch was parsed from; use :meth:`tag` and
  :meth:`feature_name` to read them. Readers that are not text-based (Parquet) put their
  strings into ``text`` too, so the interface is the same.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Batch", "empty_batch", "concat_batches", "unit_norm_rows", "CONSTANT_HASH"]

#: VW's constant (bias) feature hash (``streamlearn.io.hashing.CONSTANT_HASH``, kept here so
#: numba-free code can use it).
CONSTANT_HASH = 11650396
_I64 = np.zeros(0, np.int64)
_U8 = np.zeros(0, np.uint8)


@dataclass
class Batch:
    offsets: np.ndarray  # int64 [n+1]
    indices: np.ndarray  # uint32 [nnz]  full 32-bit feature hashes
    values: np.ndarray  # float64 [nnz]
    labels: np.ndarray  # float64 [n]   NaN = unlabeled
    weights: np.ndarray  # float64 [n]  importance weights
    lines: np.ndarray = None  # int64 [n] 1-based line numbers in `source`
    source: str = ""
    text: np.ndarray | None = None  # uint8 raw bytes the spans point into
    tag_start: np.ndarray | None = None  # int64 [n], -1 = no tag
    tag_end: np.ndarray | None = None
    name_start: np.ndarray | None = None  # int64 [nnz], -1 = unknown
    name_end: np.ndarray | None = None
    ns_start: np.ndarray | None = None  # int64 [nnz], -1 = default namespace / unknown
    ns_end: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.lines is None:
            self.lines = np.arange(1, len(self.labels) + 1, dtype=np.int64)

    @property
    def n(self) -> int:
        """Number of examples."""
        return len(self.labels)

    @property
    def nnz(self) -> int:
        """Number of stored feature entries."""
        return int(self.offsets[-1]) if len(self.offsets) else 0

    def tag(self, i: int) -> str | None:
        """Tag of example ``i`` (``None`` when it has none)."""
        if self.tag_start is None or self.tag_start[i] < 0:
            return None
        return bytes(self.text[self.tag_start[i]:self.tag_end[i]]).decode("utf-8", "replace")

    def tags(self) -> list:
        """All tags (``None`` where absent); used only when writing predictions."""
        if self.tag_start is None:
            return [None] * self.n
        return [self.tag(i) for i in range(self.n)]

    def feature_name(self, k: int) -> str | None:
        """Original name of feature entry ``k`` as ``namespace^name`` (VW's audit form), or
        just ``name`` in the default namespace; ``None`` if the reader kept no names."""
        if self.name_start is None or self.name_start[k] < 0:
            return None
        name = bytes(self.text[self.name_start[k]:self.name_end[k]]).decode("utf-8", "replace")
        if self.ns_start is not None and self.ns_start[k] >= 0:
            ns = bytes(self.text[self.ns_start[k]:self.ns_end[k]]).decode("utf-8", "replace")
            return f"{ns}^{name}"
        return name

    def slice(self, a: int, b: int) -> "Batch":
        """Examples ``a:b`` as a new batch (views where possible)."""
        lo, hi = int(self.offsets[a]), int(self.offsets[b])

        def f(x):
            return None if x is None else x[lo:hi]

        def r(x):
            return None if x is None else x[a:b]

        return Batch(
            offsets=self.offsets[a:b + 1] - lo,
            indices=self.indices[lo:hi],
            values=self.values[lo:hi],
            labels=self.labels[a:b],
            weights=self.weights[a:b],
            lines=self.lines[a:b],
            source=self.source,
            text=self.text,
            tag_start=r(self.tag_start),
            tag_end=r(self.tag_end),
            name_start=f(self.name_start),
            name_end=f(self.name_end),
            ns_start=f(self.ns_start),
            ns_end=f(self.ns_end),
        )

    def take(self, rows) -> "Batch":
        """Examples ``rows`` (in that order) as a compact new batch that owns its arrays; the
        feature-name spans are kept, with only the byte range of ``text`` they use copied (spans
        re-based). Tags are dropped."""
        rows = np.asarray(rows, np.int64)
        starts = self.offsets[rows]
        counts = self.offsets[rows + 1] - starts
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        ent = (np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])) if len(rows) else _I64
        ent = ent.astype(np.int64)
        kw = {}
        if self.name_start is not None and self.text is not None and len(ent):
            none = np.full(len(ent), -1, np.int64)
            ns, ne = self.name_start[ent], self.name_end[ent]
            ss = self.ns_start[ent] if self.ns_start is not None else none
            se = self.ns_end[ent] if self.ns_end is not None else none
            used = np.concatenate([ns[ns >= 0], ss[ss >= 0]])
            used_end = np.concatenate([ne[ns >= 0], se[ss >= 0]])
            lo = int(used.min()) if len(used) else 0
            hi = int(used_end.max()) if len(used_end) else 0
            kw = dict(text=np.array(self.text[lo:hi], np.uint8),
                      name_start=np.where(ns >= 0, ns - lo, -1), name_end=np.where(ns >= 0, ne - lo, -1),
                      ns_start=np.where(ss >= 0, ss - lo, -1), ns_end=np.where(ss >= 0, se - lo, -1))
        return Batch(offsets, self.indices[ent].copy(), self.values[ent].copy(),
                     self.labels[rows].copy(), self.weights[rows].copy(),
                     lines=self.lines[rows].copy(), source=self.source, **kw)

    @classmethod
    def from_dense(cls, X, y=None, weights=None, hashes=None) -> "Batch":
        """Build a batch from a dense matrix (zeros dropped). Feature ``j`` gets hash
        ``hashes[j]`` (default: ``j``). For tests and the Python API."""
        X = np.asarray(X, dtype=np.float64)
        n, d = X.shape
        hashes = np.arange(d, dtype=np.uint32) if hashes is None else np.asarray(hashes, np.uint32)
        mask = X != 0
        counts = mask.sum(axis=1)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        rows, cols = np.nonzero(mask)
        labels = np.full(n, np.nan) if y is None else np.asarray(y, dtype=np.float64).copy()
        w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64).copy()
        return cls(offsets, hashes[cols].copy(), X[rows, cols].copy(), labels, w)


def unit_norm_rows(b: Batch) -> Batch:
    """``--unit_norm``: scale every example's feature vector, as the learner sees it (the
    constant feature and the ``-q`` pairs included), to unit L2 norm; empty rows stay empty.
    Returns ``b`` with a new ``values`` array (the reader's is not written). The constant is
    scaled with the rest: left at 1 beside unit-norm features it dominates BEAR's curvature
    pairs (news20 test error 0.162 against 0.137; benchmarks/bear_defaults.py)."""
    if b.nnz == 0:
        return b
    rows = np.repeat(np.arange(b.n), np.diff(b.offsets))
    norm = np.sqrt(np.bincount(rows, weights=b.values * b.values, minlength=b.n))
    b.values = b.values / np.where(norm > 0, norm, 1.0)[rows]
    return b


def empty_batch() -> Batch:
    """A batch with no examples."""
    return Batch(np.zeros(1, np.int64), np.zeros(0, np.uint32), np.zeros(0), np.zeros(0), np.zeros(0))


def _shifted_spans(b: Batch, attr: str, shift: int) -> np.ndarray:
    x = getattr(b, attr)
    if x is None:
        return np.full(b.nnz, -1, np.int64)
    x = np.asarray(x, np.int64)
    return np.where(x >= 0, x + shift, -1)


def concat_batches(batches: list[Batch], names: bool = False) -> Batch:
    """Concatenate batches (features, labels, weights, lines; tags are dropped). Feature-name
    spans are dropped too unless ``names`` is set and some batch has them: then the batches'
    ``text`` bytes are concatenated and the spans re-based into them (``-1`` where unknown)."""
    if not batches:
        return empty_batch()
    offs = [np.zeros(1, np.int64)]
    base = 0
    for b in batches:
        offs.append(b.offsets[1:] + base)
        base += b.nnz
    kw = {}
    if names and any(b.name_start is not None for b in batches):
        texts = [b.text if b.text is not None else _U8 for b in batches]
        shifts = np.concatenate([[0], np.cumsum([len(t) for t in texts])[:-1]]).tolist()
        kw["text"] = np.concatenate(texts).astype(np.uint8)
        for attr in ("name_start", "name_end", "ns_start", "ns_end"):
            kw[attr] = np.concatenate([_shifted_spans(b, attr, sh) for b, sh in zip(batches, shifts)])
    return Batch(
        np.concatenate(offs),
        np.concatenate([b.indices for b in batches]),
        np.concatenate([b.values for b in batches]),
        np.concatenate([b.labels for b in batches]),
        np.concatenate([b.weights for b in batches]),
        np.concatenate([b.lines for b in batches]),
        source=batches[0].source,
        **kw,
    )
