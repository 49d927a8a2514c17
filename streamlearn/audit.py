"""VW's ``--audit``, ``--invert_hash FILE`` and ``--readable_model FILE`` (VW 9's ``gd.cc``:
``print_features`` / ``audit_feature``, ``save_load_regressor`` in text mode).

* ``--audit``: per example, the prediction (VW's ``print_result_by_ref``: fixed with 6
  decimals, no decimals for a whole number, then the tag) and a tab-started line of its
  features as ``ns^name:index:value:weight`` (``name`` alone in the default namespace,
  ``Constant``, ``a^x*b^y`` for interactions; ``index`` masked to ``-b`` bits; the weight
  before this example's update), sorted by ``|weight * value|`` descending with ties in
  feature order, as VW sorts them. A learner's :meth:`audit_columns` says what follows the
  index: AdaGrad gives ``weight@G`` (VW's ``weight@adaptive sum``); Oja-SON its effective
  weight ``u_bar + Z^T b`` (pre-scaled coordinates), BEAR and MISSION their Count Sketch's
  estimate for the feature's 32-bit hash (nothing under ``--oaa``).
* ``--readable_model FILE``: header lines in VW's layout, then ``index:w G [N]`` for every
  index with a nonzero weight, by index (VW's text model with its saved state per weight).
* ``--invert_hash FILE``: the same, each line led by the name first seen for its index
  (``ns^name:index:w G [N]``; VW keeps the first name too). Names are collected only when
  asked, per batch: a bitmap of the indices seen keeps the Python work to the examples that
  bring a new index.

Feature names come from the reader's name spans (linear features) and are rebuilt for the
interactions from VW's rules (:mod:`streamlearn.io.interactions`), in the order the reader
emits them.
"""
from __future__ import annotations

import itertools

import numpy as np

from .io.hashing import CONSTANT_HASH
from .io.interactions import expand
from .memory import lazy_zeros

__all__ = ["FeatureNamer", "Auditor", "HashNames", "write_readable_model", "format_prediction"]


def format_prediction(p: float) -> str:
    """VW's ``print_result_by_ref`` number: whole numbers without decimals, else 6."""
    f = float(np.float32(p))
    return f"{f:.0f}" if np.floor(f) == f else f"{f:.6f}"


def _num(v) -> str:
    """A float as VW's ``ostream << float`` prints it (6 significant digits)."""
    return f"{float(np.float32(v)):g}"


class FeatureNamer:
    """Names of a batch's features as VW prints them, from the reader's configuration
    (``inter``: its :class:`~streamlearn.io.interactions.Interactions`; ``constant``)."""

    def __init__(self, inter, constant: bool):
        self.inter = inter
        self.constant = constant

    def names(self, batch, i: int) -> list:
        """Names of example ``i``'s entries (``None`` where unknown)."""
        lo, hi = int(batch.offsets[i]), int(batch.offsets[i + 1])
        out = [None] * (hi - lo)
        if batch.name_start is None:
            return out
        lin = []  # (letter, name)
        k = lo
        while k < hi and batch.name_start[k] >= 0:
            name = batch.feature_name(k)
            ns = batch.ns_start[k] if batch.ns_start is not None else -1
            letter = int(batch.text[ns]) if ns >= 0 else 32
            lin.append((letter, name, int(batch.indices[k])))
            out[k - lo] = name
            k += 1
        if self.constant and k < hi and int(batch.indices[k]) == CONSTANT_HASH:
            out[k - lo] = "Constant"
            k += 1
        if k >= hi or not self.inter:
            return out
        by: dict = {}
        for letter, name, _ in lin:
            by.setdefault(letter, []).append(name)
        inters = expand(self.inter.inters, set(by), self.inter.leave_duplicates)
        gen = []
        for t in inters:
            lists = [list(enumerate(by.get(c, ()))) for c in t]
            for combo in itertools.product(*lists):
                if any(t[j] == t[j - 1] and combo[j][0] < combo[j - 1][0] for j in range(1, len(t))):
                    continue
                gen.append("*".join(n for _, n in combo))
        if len(gen) == hi - k:  # else (e.g. --ignore_linear dropped a part): unnamed
            out[k - lo:] = gen
        return out


class Auditor:
    """``--audit``: feeds the learner one example at a time (:meth:`stream`) and writes each
    example's audit lines once its prediction is known (:meth:`on_predictions`) with the
    feature state read before its update."""

    def __init__(self, learner, namer: FeatureNamer, write):
        self.learner = learner
        self.namer = namer
        self.write = write
        self.pending = []

    def stream(self, batches):
        for b in batches:
            if b.n <= 1:
                self._stash(b)
                yield b
                continue
            for i in range(b.n):
                part = b.slice(i, i + 1)
                part.extra = b.extra if i == 0 else {}
                self._stash(part)
                yield part

    def _stash(self, part):
        if part.n == 1:
            idx = part.indices.astype(np.int64) & self.learner.mask
            cols = self.learner.audit_columns(part.indices)
            self.pending.append((part, idx, cols))

    def on_predictions(self, part, pred):
        while self.pending and self.pending[0][0] is not part:
            self.pending.pop(0)  # skipped (bad label): no prediction
        if not self.pending:
            return
        part, idx, cols = self.pending.pop(0)
        tags = part.tags()
        head = format_prediction(pred[0])
        if tags and tags[0]:
            head += " " + tags[0]
        names = self.namer.names(part, 0)
        vals = part.values
        feats = []
        for k in range(len(idx)):
            s = f"{names[k] if names[k] is not None else '?'}:{int(idx[k])}:{_num(vals[k])}"
            if cols:
                s += ":" + _num(cols[0][k]) + "".join(f"@{_num(c[k])}" for c in cols[1:2])
            feats.append(s)
        if cols:
            key = np.abs(np.asarray(cols[0], np.float32) * np.asarray(vals, np.float32))
            order = sorted(range(len(feats)), key=lambda k: -key[k])
            feats = [feats[k] for k in order]
        self.write(head + "\n\t" + "\t".join(feats) + "\n")


class HashNames:
    """``--invert_hash``: the first name seen for each masked index (:meth:`add` per batch)."""

    def __init__(self, namer: FeatureNamer, mask: int):
        self.namer = namer
        self.mask = mask
        # one bit per index (2^b / 8 bytes, allocated lazily: only the pages of seen indices
        # become resident, even at -b 32)
        self.seen = lazy_zeros(((mask + 1) + 7) >> 3, np.uint8)
        self.names: dict = {}

    def add(self, batch, pred=None):
        if batch.n == 0:
            return
        idx = batch.indices.astype(np.int64) & self.mask
        byte, bit = idx >> 3, (np.uint8(1) << (idx & 7).astype(np.uint8))
        new = (self.seen[byte] & bit) == 0
        if not new.any():
            return
        rows = np.unique(np.searchsorted(batch.offsets, np.flatnonzero(new), side="right") - 1)
        for i in rows:
            lo = int(batch.offsets[i])
            for k, name in enumerate(self.namer.names(batch, int(i))):
                h = int(idx[lo + k])
                if h not in self.names and name is not None:
                    self.names[h] = name
        np.bitwise_or.at(self.seen, byte[new], bit[new])


def write_readable_model(path, learner, reader: dict, version: str, names: dict | None = None) -> None:
    """VW's text model, to ``path`` (a file name or a binary file): its header lines
    (``Version``, ``Id``, ``Min label``, ``Max label``, ``bits``, ``lda``, ``ngram``, ``skip``,
    ``options``), then ``[name:]index:w G [N]`` for each index whose weight is not zero, by
    index (``names``: ``--invert_hash``)."""
    idx, cols = learner.readable_weights()
    lo, hi = learner.label_range()
    opts = []
    for key, flag in (("quadratic", "--quadratic"), ("cubic", "--cubic"), ("interactions", "--interactions"),
                      ("ignore", "--ignore"), ("keep", "--keep"), ("ignore_linear", "--ignore_linear")):
        opts += [f"{flag} {v}" for v in reader.get(key, ())]
    if reader.get("leave_duplicate_interactions"):
        opts.append("--leave_duplicate_interactions")
    if not reader.get("constant", True):
        opts.append("--noconstant")
    lines = [f"Version streamlearn {version}", "Id ", f"Min label:{_num(lo)}", f"Max label:{_num(hi)}",
             f"bits:{learner.bits}", "lda:0", "0 ngram:", "0 skip:", "options: " + " ".join(opts)]
    if not hasattr(path, "write"):
        with open(path, "wb") as f:
            return write_readable_model(f, learner, reader, version, names)
    f = path  # a binary file (the run's output plan stages it)
    f.write(("\n".join(lines) + "\n").encode("utf-8"))
    for j, h in enumerate(idx.tolist()):
        lead = f"{names[h]}:" if names and h in names else ""
        f.write((f"{lead}{h}:" + " ".join(_num(c[j]) for c in cols) + "\n").encode("utf-8", "surrogateescape"))
