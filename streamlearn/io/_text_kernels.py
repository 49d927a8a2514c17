"""Compiled parsers for VW text and LIBSVM/SVMlight chunks (only ``@njit`` functions and
their constant tables).

One call of :func:`parse_chunk` parses a whole chunk of bytes (complete lines) and hashes every
feature; Python never loops over lines or features. Output arrays start from an estimate and
are doubled inside the kernel when needed.

Float parsing (:func:`parse_float`): a decimal parser for ``[+-]digits[.digits][(e|E)[+-]digits]``
(at least one mantissa digit; ``inf``/``nan`` and anything else are rejected). Up to 18
significant digits are kept in an integer mantissa ``m`` with a decimal exponent ``q``.

* Exact fast path (Clinger 1990): ``m < 2**53`` and ``|q| <= 22`` -> one multiplication or
  division by an exactly representable power of ten, hence correctly rounded.
* Otherwise ``m * 10**q`` is formed in double-double arithmetic (Dekker 1971 two-product)
  from a table of 10**q as a (hi, lo) pair computed exactly in Python (pre-scaled by 2**+-256
  at the ends of the range); its ~106-bit accuracy gives the correctly rounded double except
  when the true value lies within about 2**-100 (relative) of a rounding boundary. Measured:
  every one of 145k random <= 18-digit strings and 100k ``repr`` strings equals ``float()``
  outside the subnormal range (subnormal results may be 1 ulp off: double rounding).
* Longer mantissas keep 18 digits plus a sticky half unit for the dropped nonzero digits:
  within 1 ulp of ``float()`` (about 0.1% of random 19-25 digit strings differ).

Numbers that are not finite make their line malformed, each with its own reason (as learners
must never see NaN or inf): a label, importance, base, namespace weight or feature value
spelled ``nan`` / ``inf`` / ``infinity`` (any case, signed) or beyond the double range
(``1e400``), and a feature value times its namespace weight, or a ``-q`` product, that
overflows. Underflow (``1e-400``) gives 0, and zero-valued features are dropped.

Also malformed: a negative importance weight (VW refuses it: "importance weights must be
non-negative"), a LIBSVM index past 2**63 - 1 (LIBSVM's ``strtol`` reports ERANGE there;
below it the hash is the index mod 2**32), and an example with more than ``max_feats``
features, its interactions included: they are counted (saturating) before they are
generated, and a line reserves room for at most ``max_feats`` linear features, so one line's
memory is bounded whatever its length or its ``-q`` products.
"""
from fractions import Fraction

import numpy as np
from numba import njit

from ._hash_kernels import CONSTANT_HASH, M32 as _M32, hashstring, murmur3_32
from ._interact_kernels import bucket, grow as _grow, interaction_count, interaction_fill, max_order, unbucket

__all__ = [
    "parse_float",
    "scan_float",
    "parse_chunk",
    "FMT_VW",
    "FMT_LIBSVM",
    "ERROR_REASONS",
]

from ._text_codes import (  # noqa: E402  (the codes live in a numba-free module)
    ERR_BASE,
    ERR_BASE_NONFINITE,
    ERR_FEATURE_VALUE,
    ERR_IMPORTANCE,
    ERR_IMPORTANCE_NEGATIVE,
    ERR_IMPORTANCE_NONFINITE,
    ERR_INDEX,
    ERR_INDEX_RANGE,
    ERR_LABEL,
    ERR_LABEL_NONFINITE,
    ERR_LABEL_TOKENS,
    ERR_NO_COLON,
    ERR_NS_WEIGHT,
    ERR_NS_WEIGHT_NONFINITE,
    ERR_QUADRATIC_OVERFLOW,
    ERR_TOO_MANY_FEATURES,
    ERR_VALUE_NONFINITE,
    ERR_VALUE_OVERFLOW,
    ERROR_REASONS,
    FMT_LIBSVM,
    FMT_VW,
)

# --- powers of ten as double-double (hi, lo), 10**q for q in [_PMIN, _PMAX] -----------------
# Entries far from 1 are stored pre-scaled by an exact power of two (2**256 for q < -280,
# 2**-256 for q > 280) so that hi and lo stay normal doubles; _scale undoes the scaling.
_PMIN = -360
_PMAX = 310
_SCALE_Q = 280
_TWO256 = 2.0 ** 256
_TWOM256 = 2.0 ** -256


def _pow10_tables():
    hi = np.empty(_PMAX - _PMIN + 1)
    lo = np.empty(_PMAX - _PMIN + 1)
    for q in range(_PMIN, _PMAX + 1):
        x = Fraction(10) ** q
        if q < -_SCALE_Q:
            x *= 2 ** 256
        elif q > _SCALE_Q:
            x /= 2 ** 256
        h = float(x)
        hi[q - _PMIN] = h
        lo[q - _PMIN] = float(x - Fraction(h))
    return hi, lo


_P10_HI, _P10_LO = _pow10_tables()
_EXACT_P10 = np.array([10.0 ** i for i in range(23)])
_SPLITTER = 134217729.0  # 2**27 + 1
_TWO53 = 9007199254740992
_U10 = np.uint64(10)
_MAX_INDEX = np.uint64((1 << 63) - 1)  # the largest LIBSVM index (LIBSVM's strtol: ERANGE past it)


@njit(cache=True, nogil=True)
def _two_prod(a, b):
    """Dekker's exact product: returns (p, e) with p + e == a * b exactly (no overflow)."""
    p = a * b
    t = _SPLITTER * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLITTER * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@njit(cache=True, nogil=True)
def _scale(m, q, sticky):
    """Double nearest to ``(m + (0.5 if sticky else 0)) * 10**q`` for ``0 < m < 10**18``;
    ``sticky`` marks nonzero digits dropped beyond the 18 kept in ``m``."""
    if not sticky and m < _TWO53:
        if q >= 0 and q <= 22:
            return float(m) * _EXACT_P10[q]
        if q < 0 and q >= -22:
            return float(m) / _EXACT_P10[-q]
        if q > 22 and q <= 22 + 15:
            mm = m * np.int64(10) ** (q - 22)  # exact integer if it stays below 2**53
            if m <= _TWO53 // np.int64(10) ** (q - 22) and mm < _TWO53:
                return float(mm) * _EXACT_P10[22]
    if q > _PMAX:
        return np.inf
    if q < _PMIN:
        return 0.0
    # m as double-double (m < 2**63, so the int64 subtraction is exact)
    mh = float(m)
    ml = float(m - np.int64(mh))
    if sticky:
        ml += 0.5
    ph = _P10_HI[q - _PMIN]
    pl = _P10_LO[q - _PMIN]
    p, e = _two_prod(mh, ph)
    e += mh * pl + ml * ph
    r = p + e
    if q < -_SCALE_Q:
        r *= _TWOM256
    elif q > _SCALE_Q:
        r *= _TWO256
    return r


@njit(cache=True, nogil=True)
def scan_float(buf, s, e):
    """Read the longest decimal number starting at ``buf[s]`` (not beyond ``e``).

    Returns ``(value, ok, end)``: ``end`` is the index of the first byte not read. Accepts
    ``[+-]d+[.d*]`` and ``[+-].d+`` with an optional exponent ``(e|E)[+-]d+``; ``ok`` is False
    when there is no mantissa digit or an exponent marker has no digits. Overflow gives
    ``inf`` (as ``float()`` does); callers check finiteness and what follows ``end``."""
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):  # + -
        neg = buf[i] == 45
        i += 1
    m = np.int64(0)
    nd = 0  # significant digits kept in m
    q = 0
    sticky = False  # a nonzero digit was dropped
    any_digit = False
    while i < e:
        c = buf[i]
        if c < 48 or c > 57:
            break
        any_digit = True
        if nd < 18:
            m = m * 10 + (c - 48)
            if m > 0:
                nd += 1
        else:
            q += 1
            if c != 48:
                sticky = True
        i += 1
    if i < e and buf[i] == 46:  # '.'
        i += 1
        while i < e:
            c = buf[i]
            if c < 48 or c > 57:
                break
            any_digit = True
            if nd < 18:
                m = m * 10 + (c - 48)
                if m > 0:
                    nd += 1
                q -= 1
            elif c != 48:
                sticky = True
            i += 1
    if not any_digit:
        return 0.0, False, i
    if i < e and (buf[i] == 101 or buf[i] == 69):  # e E
        i += 1
        eneg = False
        if i < e and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        x = 0
        nexp = 0
        while i < e:
            c = buf[i]
            if c < 48 or c > 57:
                break
            # exact up to 10**15 (beyond it the value is 0 or inf: no line holds 10**15
            # mantissa digits to offset it); a smaller cap misread 2 MB numbers like
            # "0.<2000000 zeros>1e2000001"
            if x < 100000000000000:
                x = x * 10 + (c - 48)
            nexp += 1
            i += 1
        if nexp == 0:
            return 0.0, False, i
        q += -x if eneg else x
    if m == 0:
        v = 0.0
    else:
        v = _scale(m, q, sticky)
    return (-v if neg else v), True, i


@njit(cache=True, nogil=True)
def parse_float(buf, s, e):
    """Parse the decimal number ``buf[s:e]``, which must be consumed entirely.

    Returns ``(value, ok)``; see :func:`scan_float` for the accepted syntax."""
    v, ok, end = scan_float(buf, s, e)
    if end != e:
        ok = False
    return v, ok


@njit(cache=True, nogil=True)
def _is_ws(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12




@njit(cache=True, nogil=True)
def _lower(c):
    return c + 32 if c >= 65 and c <= 90 else c


@njit(cache=True, nogil=True, inline="always")
def _is_value_end(c, bar_ends):
    return _is_ws(c) or (bar_ends and c == 124)


@njit(cache=True, nogil=True, inline="always")
def _feature_value(buf, s, e, bar_ends):
    """The value after a feature's ``:`` at ``buf[s]``: ``(value, end, status)``, status 0 for a
    finite number ending at whitespace (or at ``|`` when ``bar_ends``: VW text), else
    ERR_VALUE_NONFINITE (nan/inf/beyond the double range) or ERR_FEATURE_VALUE, with ``end`` at
    the end of the bad token."""
    v, ok, k = scan_float(buf, s, e)
    if not ok or (k < e and not _is_value_end(buf[k], bar_ends)):
        k = s
        while k < e and not _is_value_end(buf[k], bar_ends):
            k += 1
        return v, k, (ERR_VALUE_NONFINITE if _is_nonfinite_word(buf, s, k) else ERR_FEATURE_VALUE)
    if not np.isfinite(v):
        return v, k, ERR_VALUE_NONFINITE
    return v, k, 0


@njit(cache=True, nogil=True)
def _is_nonfinite_word(buf, s, e):
    """True if ``buf[s:e]`` spells ``[+-](nan|inf|infinity)`` (any case): a number that is not
    finite, reported as such rather than as "non-numeric"."""
    if s < e and (buf[s] == 43 or buf[s] == 45):
        s += 1
    n = e - s
    if n == 3:
        a, b, c = _lower(buf[s]), _lower(buf[s + 1]), _lower(buf[s + 2])
        return (a == 110 and b == 97 and c == 110) or (a == 105 and b == 110 and c == 102)
    if n == 8:
        word = (105, 110, 102, 105, 110, 105, 116, 121)  # infinity
        for k in range(8):
            if _lower(buf[s + k]) != word[k]:
                return False
        return True
    return False


@njit(cache=True, nogil=True)
def _parse_num(buf, s, e):
    """The number spanning exactly ``buf[s:e]`` -> (value, status): status 0 = a finite
    number, 1 = not a number, 2 = NaN / infinite / beyond the double range."""
    v, ok = parse_float(buf, s, e)
    if ok:
        return v, 0 if np.isfinite(v) else 2
    return v, 2 if _is_nonfinite_word(buf, s, e) else 1


@njit(cache=True, nogil=True)
def _index_overflows(buf, i, j, h):
    """Whether the LIBSVM index ``buf[i:j]`` (digits, read into ``h`` mod 2**64) is past
    2**63 - 1. Called only for more than 18 digits: fewer cannot overflow; with 19 significant
    digits ``h`` is exact (below 10**19 < 2**64); 20 or more are past it."""
    while i < j - 1 and buf[i] == 48:
        i += 1
    n = j - i
    return n > 19 or (n == 19 and h > _MAX_INDEX)


@njit(cache=True, nogil=True)
def _push_err(err_line, err_code, n_err, line, code):
    if n_err == len(err_line):
        err_line = _grow(err_line, n_err, 2 * n_err)
        err_code = _grow(err_code, n_err, 2 * n_err)
    err_line[n_err] = line
    err_code[n_err] = code
    return err_line, err_code, n_err + 1


@njit(cache=True, nogil=True)
def parse_chunk(buf, fmt, terms, toff, nsflags, add_constant, keep_names, max_feats):
    """Parse all lines of ``buf`` (``uint8``; complete lines, the last one may lack ``\\n``).

    Parameters
    ----------
    buf : uint8 array
    fmt : int
        ``FMT_VW`` or ``FMT_LIBSVM``.
    terms, toff : int64 arrays
        Interactions of any order: interaction ``i`` is ``terms[toff[i]:toff[i + 1]]``, the
        first bytes of its namespaces (``-q ab`` -> ``terms=[97, 98]``, ``toff=[0, 2]``;
        :mod:`streamlearn.io._interact_kernels`); LIBSVM features live in namespace ``' '``.
    nsflags : uint8 array of 256
        Per namespace first byte: bit 1 drops its features (``--ignore`` / ``--keep``), bit 2
        only its linear features (``--ignore_linear``: they still enter interactions).
    add_constant : bool
        Append VW's constant feature (hash 11650396, value 1) to every example.
    keep_names : bool
        Fill name / namespace spans (else those arrays are empty).
    max_feats : int
        The most features an example may have, linear, constant and interactions together
        (``0 <= max_feats < 2**56``); a line that would have more is malformed
        (``ERR_TOO_MANY_FEATURES``), found before its interactions are allocated, so that
        the memory a line takes is bounded whatever its ``-q`` products.

    Returns
    -------
    offsets, indices, values, labels, weights, ex_line, tag_start, tag_end,
    name_start, name_end, ns_start, ns_end, err_line, err_code, n_lines
        ``ex_line`` / ``err_line`` are 0-based line numbers within the chunk; ``n_lines`` is
        the number of lines (blank ones included) in the chunk.
    """
    L = len(buf)
    # upper bound on the number of lines
    n_nl = 0
    for p in range(L):
        if buf[p] == 10:
            n_nl += 1
    max_lines = n_nl + 1
    offsets = np.empty(max_lines + 1, np.int64)
    labels = np.empty(max_lines, np.float64)
    weights = np.empty(max_lines, np.float64)
    ex_line = np.empty(max_lines, np.int64)
    tag_start = np.empty(max_lines, np.int64)
    tag_end = np.empty(max_lines, np.int64)
    err_line = np.empty(16, np.int64)
    err_code = np.empty(16, np.int64)
    n_err = np.int64(0)  # not a literal 0: numba would also compile the callees for a constant

    cap = L // 4 + max_lines * (2 if add_constant else 1) + 16
    indices = np.empty(cap, np.uint32)
    values = np.empty(cap, np.float64)
    letters = np.empty(cap, np.uint8)
    ncap = cap if keep_names else 0
    name_start = np.empty(ncap, np.int64)
    name_end = np.empty(ncap, np.int64)
    ns_start = np.empty(ncap, np.int64)
    ns_end = np.empty(ncap, np.int64)

    ninter = len(toff) - 1
    bcnt = np.zeros(256, np.int64)
    bstart = np.zeros(256, np.int64)
    used = np.zeros(256, np.int64)
    order = np.empty(16, np.int64)
    mo = max_order(toff)
    ipos = np.zeros(mo + 1, np.int64)
    ihs = np.zeros(mo + 1, np.uint64)
    ivs = np.zeros(mo + 1, np.float64)
    any_lin_ignored = False
    for c in range(256):
        if nsflags[c] & 2:
            any_lin_ignored = True
    skip = (nsflags[32] & 1) != 0

    offsets[0] = 0
    nnz = np.int64(0)  # (as n_err)
    n_ex = 0
    line = np.int64(0)  # (as n_err)
    pos = 0
    while pos < L:
        eol = pos
        while eol < L and buf[eol] != 10:
            eol += 1
        s = pos
        e = eol
        pos = eol + 1
        cur_line = line
        line += 1
        if fmt == FMT_LIBSVM:
            for p in range(s, e):
                if buf[p] == 35:  # '#': comment to end of line
                    e = p
                    break
        while s < e and _is_ws(buf[s]):
            s += 1
        while e > s and _is_ws(buf[e - 1]):
            e -= 1
        if s == e:
            continue  # blank line

        # ensure room for the linear features of this line (+ constant), at most max_feats
        need = nnz + min((e - s + 1) // 2, max_feats) + 2
        if need > cap:
            newcap = max(2 * cap, need)
            indices = _grow(indices, nnz, newcap)
            values = _grow(values, nnz, newcap)
            letters = _grow(letters, nnz, newcap)
            if keep_names:
                name_start = _grow(name_start, nnz, newcap)
                name_end = _grow(name_end, nnz, newcap)
                ns_start = _grow(ns_start, nnz, newcap)
                ns_end = _grow(ns_end, nnz, newcap)
            cap = newcap

        ex_start = nnz
        lim = ex_start + max_feats  # a feature written at lim or beyond is one too many
        status = 0
        label = np.nan
        weight = 1.0
        t0 = -1
        t1 = -1
        if fmt == FMT_VW:
            bar = s
            while bar < e and buf[bar] != 124:  # '|'
                bar += 1
            # --- label section: tokens in [s, bar)
            ts0 = -1
            te0 = -1
            ts1 = -1
            te1 = -1
            ts2 = -1
            te2 = -1
            ts3 = -1
            te3 = -1
            ntok = 0
            p = s
            while p < bar:
                if _is_ws(buf[p]):
                    p += 1
                    continue
                q = p
                while q < bar and not _is_ws(buf[q]):
                    q += 1
                if ntok == 0:
                    ts0 = p
                    te0 = q
                elif ntok == 1:
                    ts1 = p
                    te1 = q
                elif ntok == 2:
                    ts2 = p
                    te2 = q
                elif ntok == 3:
                    ts3 = p
                    te3 = q
                else:
                    # keep the last token in slot 3 (it may be the tag)
                    ts3 = p
                    te3 = q
                ntok += 1
                p = q
            if ntok > 0:
                # the last token is the tag if it starts with ' or touches the bar (VW 9)
                if ntok == 1:
                    ls = ts0
                    le = te0
                elif ntok == 2:
                    ls = ts1
                    le = te1
                elif ntok == 3:
                    ls = ts2
                    le = te2
                else:
                    ls = ts3
                    le = te3
                if buf[ls] == 39:
                    t0 = ls + 1
                    t1 = le
                    ntok -= 1
                elif bar < e and le == bar:
                    t0 = ls
                    t1 = le
                    ntok -= 1
            if ntok > 3:
                status = ERR_LABEL_TOKENS
            else:
                if ntok >= 1:
                    label, st = _parse_num(buf, ts0, te0)
                    if st != 0:
                        status = ERR_LABEL if st == 1 else ERR_LABEL_NONFINITE
                if status == 0 and ntok >= 2:
                    weight, st = _parse_num(buf, ts1, te1)
                    if st != 0:
                        status = ERR_IMPORTANCE if st == 1 else ERR_IMPORTANCE_NONFINITE
                    elif weight < 0.0:
                        status = ERR_IMPORTANCE_NEGATIVE
                if status == 0 and ntok >= 3:
                    _, st = _parse_num(buf, ts2, te2)
                    if st != 0:
                        status = ERR_BASE if st == 1 else ERR_BASE_NONFINITE
            # --- features
            ns_hash = np.uint64(0)
            letter = 32
            nsw = 1.0
            nss = -1
            nse = -1
            i = bar
            while status == 0 and i < e:
                c = buf[i]
                if c == 124:  # '|' starts a namespace
                    i += 1
                    nsw = 1.0
                    if i >= e or _is_ws(buf[i]) or buf[i] == 124:
                        ns_hash = np.uint64(0)
                        letter = 32
                        nss = -1
                        nse = -1
                        skip = (nsflags[32] & 1) != 0
                    else:
                        j = i
                        while j < e and not _is_ws(buf[j]) and buf[j] != 58 and buf[j] != 124:
                            j += 1
                        nss = i
                        nse = j
                        letter = buf[i]
                        skip = (nsflags[letter] & 1) != 0
                        ns_hash = hashstring(buf, i, j, np.uint64(0))
                        if j < e and buf[j] == 58:  # ':' namespace weight
                            k = j + 1
                            while k < e and not _is_ws(buf[k]) and buf[k] != 124:
                                k += 1
                            nsw, st = _parse_num(buf, j + 1, k)
                            if st != 0:
                                status = ERR_NS_WEIGHT if st == 1 else ERR_NS_WEIGHT_NONFINITE
                            j = k
                        i = j
                    continue
                if _is_ws(c):
                    i += 1
                    continue
                j = i
                alldig = True
                dv = np.uint64(0)
                while j < e:
                    c = buf[j]
                    if c == 58 or c == 124 or _is_ws(c):
                        break
                    if c >= 48 and c <= 57:
                        dv = dv * _U10 + np.uint64(c - 48)
                    else:
                        alldig = False
                    j += 1
                v = 1.0
                nxt = j
                if j < e and buf[j] == 58:
                    v, k, status = _feature_value(buf, j + 1, e, True)
                    if status:
                        break
                    nxt = k
                val = v * nsw
                if not np.isfinite(val):
                    status = ERR_VALUE_OVERFLOW
                    break
                if val != 0.0 and not skip:
                    if nnz >= lim:
                        status = ERR_TOO_MANY_FEATURES
                        break
                    if j == i:
                        hv = ns_hash
                    elif buf[i] <= 32 or buf[j - 1] <= 32:  # control bytes: VW trims them
                        hv = hashstring(buf, i, j, ns_hash)
                    elif alldig:
                        hv = (dv + ns_hash) & _M32
                    else:
                        hv = murmur3_32(buf, i, j, ns_hash)
                    indices[nnz] = np.uint32(hv)
                    values[nnz] = val
                    letters[nnz] = letter
                    if keep_names:
                        name_start[nnz] = i
                        name_end[nnz] = j
                        ns_start[nnz] = nss
                        ns_end[nnz] = nse
                    nnz += 1
                i = nxt
        else:
            # --- LIBSVM / SVMlight: label idx:val ... [qid:N]
            p = s
            while p < e and not _is_ws(buf[p]):
                p += 1
            label, st = _parse_num(buf, s, p)
            if st != 0:
                status = ERR_LABEL if st == 1 else ERR_LABEL_NONFINITE
            i = p
            while status == 0 and i < e:
                c = buf[i]
                if _is_ws(c):
                    i += 1
                    continue
                # index digits -> hash (the all-digit rule of hashstring, seed 0)
                j = i
                h = np.uint64(0)
                while j < e:
                    c = buf[j]
                    if c < 48 or c > 57:
                        break
                    h = h * _U10 + np.uint64(c - 48)
                    j += 1
                if j > i and j < e and buf[j] == 58:
                    if j - i > 18 and _index_overflows(buf, i, j, h):
                        status = ERR_INDEX_RANGE
                        break
                    v, k, status = _feature_value(buf, j + 1, e, False)
                    if status:
                        break
                    if v != 0.0 and not skip:
                        if nnz >= lim:
                            status = ERR_TOO_MANY_FEATURES
                            break
                        indices[nnz] = np.uint32(h & _M32)
                        values[nnz] = v
                        letters[nnz] = 32
                        if keep_names:
                            name_start[nnz] = i
                            name_end[nnz] = j
                            ns_start[nnz] = -1
                            ns_end[nnz] = -1
                        nnz += 1
                    i = k
                    continue
                # not index:value -- qid:N (ignored) or an error
                k = i
                colon = -1
                while k < e and not _is_ws(buf[k]):
                    if buf[k] == 58 and colon < 0:
                        colon = k
                    k += 1
                if colon < 0:
                    status = ERR_NO_COLON
                elif (colon - i == 3 and buf[i] == 113 and buf[i + 1] == 105
                        and buf[i + 2] == 100):  # qid:N
                    i = k
                else:
                    status = ERR_INDEX

        if status != 0:
            nnz = ex_start
            err_line, err_code, n_err = _push_err(err_line, err_code, n_err, cur_line, status)
            continue

        lin_end = nnz
        if add_constant:
            if nnz >= lim:
                nnz = ex_start
                err_line, err_code, n_err = _push_err(err_line, err_code, n_err, cur_line,
                                                      np.int64(ERR_TOO_MANY_FEATURES))
                continue
            indices[nnz] = np.uint32(CONSTANT_HASH)
            values[nnz] = 1.0
            letters[nnz] = 0
            if keep_names:
                name_start[nnz] = -1
                name_end[nnz] = -1
                ns_start[nnz] = -1
                ns_end[nnz] = -1
            nnz += 1

        if ninter > 0:
            nlin = lin_end - ex_start
            if len(order) < nlin:
                order = np.empty(2 * nlin, np.int64)
            nused = bucket(letters, ex_start, lin_end, bcnt, bstart, used, order)
            room = lim - nnz
            total = interaction_count(terms, toff, bcnt, room)
            if total > room:
                unbucket(bcnt, used, nused)
                nnz = ex_start
                err_line, err_code, n_err = _push_err(err_line, err_code, n_err, cur_line,
                                                      np.int64(ERR_TOO_MANY_FEATURES))
                continue
            if nnz + total > cap:
                newcap = max(2 * cap, nnz + total)
                indices = _grow(indices, nnz, newcap)
                values = _grow(values, nnz, newcap)
                letters = _grow(letters, nnz, newcap)
                if keep_names:
                    name_start = _grow(name_start, nnz, newcap)
                    name_end = _grow(name_end, nnz, newcap)
                    ns_start = _grow(ns_start, nnz, newcap)
                    ns_end = _grow(ns_end, nnz, newcap)
                cap = newcap
            q0 = nnz
            nnz, q_over = interaction_fill(indices, values, letters, nnz, terms, toff, bcnt, bstart,
                                           order, ipos, ihs, ivs)
            unbucket(bcnt, used, nused)
            if keep_names:
                for k in range(q0, nnz):
                    name_start[k] = -1
                    name_end[k] = -1
                    ns_start[k] = -1
                    ns_end[k] = -1
            if q_over:
                nnz = ex_start
                err_line, err_code, n_err = _push_err(err_line, err_code, n_err, cur_line,
                                                      np.int64(ERR_QUADRATIC_OVERFLOW))
                continue

        if any_lin_ignored:
            # --ignore_linear: the namespace's own features leave (they served the interactions)
            w = ex_start
            for k in range(ex_start, nnz):
                if k < lin_end and (nsflags[letters[k]] & 2) != 0:
                    continue
                if w != k:
                    indices[w] = indices[k]
                    values[w] = values[k]
                    letters[w] = letters[k]
                    if keep_names:
                        name_start[w] = name_start[k]
                        name_end[w] = name_end[k]
                        ns_start[w] = ns_start[k]
                        ns_end[w] = ns_end[k]
                w += 1
            nnz = w

        labels[n_ex] = label
        weights[n_ex] = weight
        ex_line[n_ex] = cur_line
        tag_start[n_ex] = t0
        tag_end[n_ex] = t1
        n_ex += 1
        offsets[n_ex] = nnz

    nn = nnz if keep_names else 0
    return (offsets[:n_ex + 1], indices[:nnz], values[:nnz], labels[:n_ex], weights[:n_ex],
            ex_line[:n_ex], tag_start[:n_ex], tag_end[:n_ex],
            name_start[:nn], name_end[:nn], ns_start[:nn], ns_end[:nn],
            err_line[:n_err], err_code[:n_err], line)
