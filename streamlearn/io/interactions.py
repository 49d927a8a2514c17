"""VW's feature interactions (``-q``, ``--cubic``, ``--interactions``, the ``:`` wildcard) and
namespace selection (``--ignore``, ``--keep``, ``--ignore_linear``), as VW 9 defines them.

An interaction names namespaces by their first byte. Its features are the products of one
feature from each namespace, in order: value ``v1 * v2 * ...``, hash ``h1`` combined with each
next hash as ``(h * 16777619) ^ h_next`` (mod 2**32; VW's ``FNV_prime`` chain of
``interactions_predict.h``: pairs, triples and the generic loop all reduce to it). Where the
same namespace repeats in a row (``-q aa``, ``--cubic aab``), VW generates combinations with
repetition, not permutations: positions within the namespace never decrease, so ``-q aa``
over features ``x, y`` gives ``xx, xy, yy`` (``process_quadratic_interaction``,
``process_cubic_interaction``, ``process_generic_interaction``; VW's ``--permutations`` is
not offered).

The list of interactions is processed as VW's ``parse_args.cc`` does: all of them are sorted
(shorter first, then bytewise); unless ``leave_duplicate_interactions``, interactions that
name the same multiset of namespaces are merged into the first in that order (``-q ba -q ab``
-> ``ab``); and any interaction with a repeated namespace that is not all one namespace is
rewritten sorted (``--cubic aba`` -> ``aab``; VW's ``must_be_left_sorted``).

A ``:`` term is VW's wildcard: VW compiles the interactions again whenever an example shows a
namespace not seen before, over every namespace seen so far whose first byte is printable
(``' '`` to ``'~'``: reserved namespaces such as the constant's are left out;
``interactions.h``, ``generate_interactions.cc``). The wildcard terms take every combination
with repetition of those namespaces (every permutation with repetition with
``leave_duplicate_interactions``), the fixed terms are inserted at their places, and the
whole list (with the explicit interactions) is sorted, merged and rewritten as above. Only
interactions whose namespaces all occur in an example produce features for it, so expanding
the wildcards over any superset of the example's namespaces gives exactly VW's features in
VW's order; the readers expand them over the namespaces that occur in each chunk of input
(:meth:`Interactions.arrays`), a cached set.

``--ignore`` drops namespaces by first byte, ``--keep`` drops every other one (it wins over
``--ignore`` as in VW: both write one table, ``--keep`` last); ``--ignore_linear`` drops a
namespace's own (linear) features but keeps it in interactions. The constant feature is never
dropped (VW adds it after ignoring). A namespace letter may be given as VW's ``\\xHH``
escape (``--ignore '\\x20'`` is the default namespace, as is ``--ignore ' '``).
"""
from __future__ import annotations

import re
import threading

import numpy as np

from ..errors import ConfigError

__all__ = ["WILDCARD", "NS_IGNORE", "NS_IGNORE_LINEAR", "Interactions", "decode_letters",
           "normalize", "expand", "interaction_arrays", "chunk_namespaces"]

#: VW's wildcard namespace byte (``:``)
WILDCARD = 58
#: ``nsflags`` bits the reader kernels take (one byte per namespace first byte)
NS_IGNORE = 1
NS_IGNORE_LINEAR = 2
_PRINTABLE = (32, 126)
#: the longest interaction taken (the C kernels' fixed scratch)
MAX_ORDER = 64  # VW's INTERACTION_NS_START .. INTERACTION_NS_END

_HEX = re.compile(rb"\\x([0-9a-fA-F]{2})")


def decode_letters(s) -> bytes:
    """The bytes of an interaction or namespace-list argument, with VW's ``\\xHH`` escapes
    decoded (``decode_inline_hex``)."""
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return _HEX.sub(lambda m: bytes([int(m.group(1), 16)]), b)


def _sort_key(t: bytes):
    return (len(t), t)


def _must_be_left_sorted(t: bytes) -> bool:
    """VW's ``must_be_left_sorted`` of an already sorted interaction: a repeated namespace
    together with another one (``aab``, ``abb``; not ``aaa`` nor ``abc``)."""
    if len(t) <= 1:
        return True
    diff = pair = False
    for a, b in zip(t, t[1:]):
        if a == b:
            if diff:
                return True
            pair = True
        else:
            if pair:
                return True
            diff = True
    return False


def normalize(inters, leave_duplicates: bool = False) -> list[bytes]:
    """VW's processing of a list of interactions (``parse_args.cc``): sort all (shorter first,
    then bytewise), merge those with the same multiset of namespaces into the first (unless
    ``leave_duplicates``), rewrite those with a repeated namespace sorted (see the module
    docstring)."""
    vec = sorted((bytes(t) for t in inters), key=_sort_key)
    keyed = [(bytes(sorted(t)), i) for i, t in enumerate(vec)]
    if not leave_duplicates:
        seen = set()
        kept = []
        for key, i in sorted(keyed, key=lambda p: p[0]):  # stable: the first of each key
            if key not in seen:
                seen.add(key)
                kept.append((key, i))
        keyed = sorted(kept, key=lambda p: p[1])
    return [key if _must_be_left_sorted(key) else vec[i] for key, i in keyed]


def _combinations_with_repetition(ns: list[int], k: int):
    """VW's ``generate_namespace_combinations_with_repetition`` (nondecreasing k-tuples)."""
    if k == 0:
        yield ()
        return
    n = len(ns)

    def rec(start, left):
        if left == 0:
            yield ()
            return
        for i in range(start, n):
            for rest in rec(i, left - 1):
                yield (ns[i],) + rest
    yield from rec(0, k)


def _permutations_with_repetition(ns: list[int], k: int):
    if k == 0:
        yield ()
        return
    for first in ns:
        for rest in _permutations_with_repetition(ns, k - 1):
            yield (first,) + rest


def expand(inters, namespaces, leave_duplicates: bool = False) -> list[bytes]:
    """The interactions VW uses once it has seen ``namespaces`` (first bytes): ``inters`` as
    :func:`normalize` returned them, wildcards expanded over the printable ones (see the
    module docstring; VW's ``compile_interactions``)."""
    if not any(WILDCARD in t for t in inters):
        return list(inters)
    ns = sorted(c for c in set(namespaces) if _PRINTABLE[0] <= c <= _PRINTABLE[1])
    out = []
    for t in inters:
        if WILDCARD not in t:
            out.append(t)
            continue
        if not ns:
            continue
        w = t.count(WILDCARD)
        gen = _permutations_with_repetition if leave_duplicates else _combinations_with_repetition
        for combo in gen(ns, w):
            it = iter(combo)
            out.append(bytes(next(it) if c == WILDCARD else c for c in t))
    return normalize(out, leave_duplicates)


def interaction_arrays(inters) -> tuple[np.ndarray, np.ndarray]:
    """Interactions (bytes) -> ``(terms, toff)``, the ``int64`` arrays the reader kernels take:
    interaction ``i`` is ``terms[toff[i]:toff[i + 1]]``."""
    toff = np.zeros(len(inters) + 1, np.int64)
    np.cumsum([len(t) for t in inters], out=toff[1:])
    terms = np.frombuffer(b"".join(inters), np.uint8).astype(np.int64)
    return terms, toff


class Interactions:
    """The interactions and namespace flags of one reader configuration (validated when made).

    Parameters
    ----------
    quadratic, cubic, interactions : sequences of str
        ``-q`` pairs, ``--cubic`` triples, ``--interactions`` of any order (at least two
        letters); ``:`` is the wildcard.
    ignore, keep, ignore_linear : sequences of str
        Namespace first letters (each character of each argument).
    leave_duplicates : bool
        VW's ``--leave_duplicate_interactions``.
    """

    def __init__(self, quadratic=(), cubic=(), interactions=(), ignore=(), keep=(),
                 ignore_linear=(), leave_duplicates=False):
        given = []
        for q in quadratic:
            b = decode_letters(q)
            if len(b) != 2:
                raise ConfigError(
                    f"quadratic interaction {q!r}: give exactly two namespace letters, e.g. 'ab'")
            given.append(b)
        for q in cubic:
            b = decode_letters(q)
            if len(b) != 3:
                raise ConfigError(
                    f"cubic interaction {q!r}: give exactly three namespace letters, e.g. 'abc'")
            given.append(b)
        for q in interactions:
            b = decode_letters(q)
            if len(b) < 2:
                raise ConfigError(
                    f"interaction {q!r}: give at least two namespace letters, e.g. 'ab' or 'abc'")
            given.append(b)
        for b in given:
            if len(b) > MAX_ORDER:
                raise ConfigError(f"interaction {b.decode('utf-8', 'replace')!r}: at most "
                                  f"{MAX_ORDER} namespaces")
        self.leave_duplicates = bool(leave_duplicates)
        self.inters = normalize(given, self.leave_duplicates)
        self.wildcard = any(WILDCARD in t for t in self.inters)
        flags = np.zeros(256, np.uint8)
        for s in ignore:
            for c in decode_letters(s):
                flags[c] |= NS_IGNORE
        if keep:
            flags |= NS_IGNORE
            for s in keep:
                for c in decode_letters(s):
                    flags[c] &= ~np.uint8(NS_IGNORE)
        for s in ignore_linear:
            for c in decode_letters(s):
                flags[c] |= NS_IGNORE_LINEAR
        self.nsflags = flags
        self._fixed = interaction_arrays(self.inters) if not self.wildcard else None
        self._cache: dict = {}
        self._lock = threading.Lock()

    def __bool__(self):
        return bool(self.inters)

    def arrays(self, namespaces=None) -> tuple[np.ndarray, np.ndarray]:
        """``(terms, toff)`` for input whose namespaces' first bytes are among ``namespaces``
        (an iterable of ints; needed only with wildcards, else ignored)."""
        if self._fixed is not None:
            return self._fixed
        key = frozenset(int(c) for c in namespaces if not (self.nsflags[int(c)] & NS_IGNORE))
        got = self._cache.get(key)
        if got is None:
            got = interaction_arrays(expand(self.inters, key, self.leave_duplicates))
            with self._lock:
                if len(self._cache) > 256:
                    self._cache.clear()
                self._cache[key] = got
        return got


def chunk_namespaces(chunk: np.ndarray, fmt: str) -> np.ndarray:
    """First bytes of the namespaces that may occur in a chunk of text (a superset: every byte
    after a ``|``, 32 for ``|`` followed by a blank or the line's end; LIBSVM: 32)."""
    if fmt == "libsvm":
        return np.array([32], np.int64)
    bars = np.flatnonzero(chunk == 124)
    if len(bars) == 0:
        return np.zeros(0, np.int64)
    nxt = bars + 1
    after = np.full(len(bars), 32, np.int64)
    ok = nxt < len(chunk)
    c = chunk[nxt[ok]].astype(np.int64)
    c[(c <= 32) | (c == 124)] = 32
    after[ok] = c
    return np.unique(after)
