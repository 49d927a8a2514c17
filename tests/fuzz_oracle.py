"""Reader fuzzing (issue 6): a slow, obvious pure-Python oracle of the VW text, LIBSVM and
Parquet readers, random line / table generators and mutators, and the checks that compare
the real readers with the oracle. Shared by ``tests/test_fuzz.py`` (hypothesis, small) and
``benchmarks/fuzz_readers.py`` (long run).

The oracle is written from the documented grammar (``streamlearn/io/vw_text.py``,
``libsvm.py``, ``parquet.py``, ``hashing.py``), one line at a time with ``bytes`` methods,
regular expressions, Python's ``float()`` and ``mmh3``; it shares no code with the readers
(the error *texts* are looked up by code in ``ERROR_REASONS``, so a changed wording does not
fail the fuzz, a changed classification does).

What counts as malformed (text), checked left to right, the first problem wins:

* more than three label tokens (after the tag); a label / importance / base token that is not
  a decimal number ``[+-](d+[.d*]|.d+)[(e|E)[+-]d+]``, or is one of ``nan``/``inf``/
  ``infinity`` (any case, signed) or beyond the double range (its own "NaN or infinite"
  reason); the same for a namespace weight ``|ns:w`` and a feature value ``name:v``
  (``a:``, ``a:x``, ``a:1:2`` are malformed);
* a feature value times its namespace weight that overflows; a ``-q`` product that overflows;
* a negative importance weight (VW refuses them too);
* LIBSVM: a token without ``:``; ``x:v`` whose ``x`` is not all digits (``qid:...`` excepted),
  or whose ``x`` is beyond 2**63 - 1 (LIBSVM's reader refuses it too; below, the hash is
  ``x mod 2**32``).

Numbers are compared exactly when they have at most 18 significant digits and are normal
doubles (the parser is correctly rounded there); longer mantissas may be 1 ulp off (as
documented), and lines holding a number in the subnormal range or next to the overflow
threshold are "fragile": only their good/bad status is compared (nothing else is exact there).
"""
from __future__ import annotations

import contextlib
import io
import math
import random
import re
import traceback
from dataclasses import dataclass, field
from decimal import Decimal

import mmh3

M32 = 0xFFFFFFFF
FNV_PRIME = 16777619
CONSTANT_HASH = 11650396
WS = b" \t\r\x0b\x0c"  # the blanks of both text formats (a line never holds b"\n")
_WS_RUN = re.compile(rb"[ \t\r\x0b\x0c]+")
_NUMBER = re.compile(rb"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NONFINITE_WORD = re.compile(rb"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_LIBSVM_FEATURE = re.compile(rb"([0-9]+):(.*)", re.DOTALL)

# error codes, named as in streamlearn.io._text_kernels (the oracle returns these names)
TEXT_ERRORS = (
    "ERR_LABEL", "ERR_IMPORTANCE", "ERR_BASE", "ERR_LABEL_TOKENS", "ERR_FEATURE_VALUE",
    "ERR_NS_WEIGHT", "ERR_NO_COLON", "ERR_INDEX", "ERR_LABEL_NONFINITE",
    "ERR_IMPORTANCE_NONFINITE", "ERR_BASE_NONFINITE", "ERR_VALUE_NONFINITE",
    "ERR_NS_WEIGHT_NONFINITE", "ERR_VALUE_OVERFLOW", "ERR_QUADRATIC_OVERFLOW",
    "ERR_IMPORTANCE_NEGATIVE", "ERR_INDEX_RANGE", "ERR_TOO_MANY_FEATURES",
)


def reason_text(code: str) -> str:
    """The reason the readers print for an oracle error code (by the kernels' table)."""
    from streamlearn.io import _text_kernels as k

    return k.ERROR_REASONS[getattr(k, code)]


# ------------------------------------------------------------------------------ hashing

def hashstring(name: bytes, seed: int) -> int:
    """VW 9 hashstring: trim bytes <= 0x20; all digits -> int + seed; else murmur3."""
    name = name.strip(bytes(range(33)))
    if name and all(48 <= c <= 57 for c in name):
        return (int(name) + seed) & M32
    if not name:
        return seed & M32
    return mmh3.hash(name, seed & M32, signed=False)


def namespace_hash(name) -> int:
    if name is None:
        return 0
    return hashstring(name, 0)


def quadratic(h1: int, h2: int) -> int:
    return ((h1 * FNV_PRIME) & M32) ^ h2


# ------------------------------------------------------------------------------ numbers

@dataclass
class Num:
    value: float = 0.0
    status: str = "ok"  # ok | syntax | nonfinite
    inexact: bool = False  # > 18 significant digits: 1 ulp allowed
    fragile: bool = False  # subnormal range / next to overflow: nothing exact


def number(tok: bytes) -> Num:
    """A text number as the readers must read it (whole token)."""
    if _NONFINITE_WORD.fullmatch(tok):
        return Num(math.nan, "nonfinite")
    if not _NUMBER.fullmatch(tok):
        return Num(math.nan, "syntax")
    parts = re.split(rb"[eE]", tok.lstrip(b"+-"), maxsplit=1)
    mant, etok = parts[0], (parts[1] if len(parts) > 1 else b"0")
    # (int() refuses > 4300 digits; any exponent beyond 10**30 is as good as infinite here)
    exp = int(etok) if len(etok) < 32 else (-1 if etok.startswith(b"-") else 1) * 10**30
    whole, _, frac = mant.partition(b".")
    digits = (whole + frac).lstrip(b"0")
    inexact = len(digits) > 18
    # decimal exponent of the leading digit: the value lies in [10**lead, 10**(lead + 1))
    if not digits:
        lead = None
    elif whole.lstrip(b"0"):
        lead = exp + len(whole.lstrip(b"0")) - 1
    else:
        lead = exp - (len(frac) - len(frac.lstrip(b"0"))) - 1
    fragile = lead is not None and (-327 <= lead <= -308 or (inexact and lead == 308))
    v = float(tok)
    if math.isinf(v):
        return Num(v, "nonfinite", inexact, fragile)
    return Num(v, "ok", inexact, fragile)


# ------------------------------------------------------------------------------ results

@dataclass
class Feature:
    h: int
    v: float
    letter: int = 32
    name: bytes | None = None  # raw name bytes (keep_names), None = no span
    ns: bytes | None = None  # raw namespace name, None = default namespace / no span


@dataclass
class Line:
    """One non-blank line (or Parquet row) as the oracle reads it."""
    line: int
    error: str | None = None  # error code name (text) or reason text (Parquet)
    label: float = math.nan
    weight: float = 1.0
    tag: bytes | None = None
    features: list = field(default_factory=list)
    inexact: bool = False
    fragile: bool = False

    @property
    def good(self):
        return self.error is None


class _Bad(Exception):
    def __init__(self, code):
        self.code = code


def _split(b: bytes) -> list:
    return [t for t in _WS_RUN.split(b) if t]


def _strip(b: bytes) -> bytes:
    return b.strip(WS)


def _num(tok, syntax_code, nonfinite_code, acc):
    n = number(tok)
    acc.inexact |= n.inexact
    acc.fragile |= n.fragile
    if n.status == "syntax":
        raise _Bad(syntax_code)
    if n.status == "nonfinite":
        raise _Bad(nonfinite_code)
    return n.value


def _finish(res: Line, feats: list, pairs, constant: bool):
    """Constant feature, then the -q pairs (VW 9: a self-pair takes i <= j; VW sorts the list
    of interactions, parse_args.cc: the pairs used here have no duplicates)."""
    out = list(feats)
    if constant:
        out.append(Feature(CONSTANT_HASH, 1.0, 0))
    for a, b in sorted(bytes(p) for p in pairs):
        fa = [f for f in feats if f.letter == a]
        fb = [f for f in feats if f.letter == b]
        for i, f1 in enumerate(fa):
            for f2 in (fa[i:] if a == b else fb):
                v = f1.v * f2.v
                if not math.isfinite(v):
                    raise _Bad("ERR_QUADRATIC_OVERFLOW")
                out.append(Feature(quadratic(f1.h, f2.h), v, 0))
    res.features = out


def vw_line(raw: bytes, lineno: int, pairs=(), constant=True) -> Line | None:
    """One VW text line -> :class:`Line` (``None`` for a blank line)."""
    body = _strip(raw)
    if not body:
        return None
    res = Line(lineno)
    try:
        bar = body.find(b"|")
        head = body if bar < 0 else body[:bar]
        toks = _split(head)
        if toks:
            last = toks[-1]
            if last.startswith(b"'"):
                res.tag = last[1:]
                toks.pop()
            elif bar >= 0 and head[-1] not in WS:  # the last token touches the bar
                res.tag = last
                toks.pop()
        if len(toks) > 3:
            raise _Bad("ERR_LABEL_TOKENS")
        codes = [("ERR_LABEL", "ERR_LABEL_NONFINITE"), ("ERR_IMPORTANCE", "ERR_IMPORTANCE_NONFINITE"),
                 ("ERR_BASE", "ERR_BASE_NONFINITE")]
        vals = []
        for k, t in enumerate(toks):
            vals.append(_num(t, *codes[k], res))
            if k == 1 and vals[1] < 0:  # VW: importance weights must be non-negative
                raise _Bad("ERR_IMPORTANCE_NEGATIVE")
        if vals:
            res.label = vals[0]
        if len(vals) > 1:
            res.weight = vals[1]
        feats = []
        if bar >= 0:
            for seg in body[bar + 1:].split(b"|"):
                if not seg or seg[0] in WS:  # `| ...`: the default namespace
                    ns, ns_h, letter, nsw, rest = None, 0, 32, 1.0, seg
                else:
                    m = _WS_RUN.search(seg)
                    first, rest = (seg, b"") if m is None else (seg[:m.start()], seg[m.start():])
                    ns, sep, wtok = first.partition(b":")
                    nsw = _num(wtok, "ERR_NS_WEIGHT", "ERR_NS_WEIGHT_NONFINITE", res) if sep else 1.0
                    ns_h, letter = hashstring(ns, 0), seg[0]
                for tok in _split(rest):
                    name, sep, vtok = tok.partition(b":")
                    v = _num(vtok, "ERR_FEATURE_VALUE", "ERR_VALUE_NONFINITE", res) if sep else 1.0
                    v = v * nsw
                    if not math.isfinite(v):
                        raise _Bad("ERR_VALUE_OVERFLOW")
                    if v != 0.0:
                        feats.append(Feature(hashstring(name, ns_h), v, letter, name, ns))
        _finish(res, feats, pairs, constant)
    except _Bad as e:
        res.error = e.code
    return res


def libsvm_line(raw: bytes, lineno: int, pairs=(), constant=True) -> Line | None:
    """One LIBSVM line -> :class:`Line` (``None`` for a blank / comment-only line)."""
    body = _strip(raw.split(b"#", 1)[0])
    if not body:
        return None
    res = Line(lineno)
    try:
        toks = _split(body)
        res.label = _num(toks[0], "ERR_LABEL", "ERR_LABEL_NONFINITE", res)
        feats = []
        for tok in toks[1:]:
            m = _LIBSVM_FEATURE.fullmatch(tok)
            if m:
                if int(m[1]) >= 2**63:  # LIBSVM's reader (strtol) refuses it: ERANGE
                    raise _Bad("ERR_INDEX_RANGE")
                v = _num(m[2], "ERR_FEATURE_VALUE", "ERR_VALUE_NONFINITE", res)
                if v != 0.0:
                    feats.append(Feature(int(m[1]) & M32, v, 32, m[1], None))
            elif b":" not in tok:
                raise _Bad("ERR_NO_COLON")
            elif tok.startswith(b"qid:"):
                continue
            else:
                raise _Bad("ERR_INDEX")
        _finish(res, feats, pairs, constant)
    except _Bad as e:
        res.error = e.code
    return res


def text_lines(data: bytes) -> list:
    """The lines of a text file (``\\n`` ends a line; a last line without one counts)."""
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()
    return lines


def sniff(data: bytes) -> str:
    """``auto``: the first non-blank line decides (a ``|`` means VW text)."""
    for line in text_lines(data):
        if _strip(line):
            return "vw" if b"|" in line else "libsvm"
    return "vw"


def oracle_text(data: bytes, fmt: str, pairs=(), constant=True) -> list:
    """Every non-blank line of ``data`` as a :class:`Line`."""
    if fmt == "auto":
        fmt = sniff(data)
    parse = vw_line if fmt == "vw" else libsvm_line
    out = []
    for no, raw in enumerate(text_lines(data), 1):
        r = parse(raw, no, pairs, constant)
        if r is not None:
            out.append(r)
    return out


# ------------------------------------------------------------------------------ Parquet oracle

RESERVED = ("weight", "tag", "indices", "values", "names", "namespaces")


class SchemaError(Exception):
    """The oracle's verdict that the whole file is rejected; ``column`` is the column the
    reader's one-line error must name (``None``: any message)."""

    def __init__(self, column):
        super().__init__(column)
        self.column = column


def _is_numeric(t):
    import pyarrow.types as pt
    return pt.is_integer(t) or pt.is_floating(t) or pt.is_boolean(t) or pt.is_decimal(t)


def _is_string(t):
    import pyarrow.types as pt
    return pt.is_string(t) or pt.is_large_string(t)


def _is_list(t):
    import pyarrow.types as pt
    return pt.is_list(t) or pt.is_large_list(t)


def parquet_plan(schema, label_column=None):
    """The documented schema rules -> dict (or raise :class:`SchemaError`)."""
    import pyarrow.types as pt

    names = schema.names
    for i, n in enumerate(names):
        if n in names[:i]:
            raise SchemaError(n)
    t = {f.name: f.type for f in schema}
    lc = label_column or "label"
    if label_column is not None and lc not in t:
        raise SchemaError(lc)
    plan = dict(label=None, weight=None, tag=None, indices=False, names=False,
                namespaces=False, ns=[], wide=[])
    if lc in t:
        if not _is_numeric(t[lc]):
            raise SchemaError(lc)
        plan["label"] = lc
    if "weight" in t and lc != "weight":
        if not _is_numeric(t["weight"]):
            raise SchemaError("weight")
        plan["weight"] = "weight"
    if "tag" in t and lc != "tag":
        if not _is_string(t["tag"]):
            raise SchemaError("tag")
        plan["tag"] = "tag"
    sparse = False
    if "indices" in t or "values" in t:
        for c in ("indices", "values"):
            if c not in t:
                raise SchemaError(c)
        if not (_is_list(t["indices"]) and pt.is_integer(t["indices"].value_type)):
            raise SchemaError("indices")
        if not (_is_list(t["values"]) and _is_numeric(t["values"].value_type)):
            raise SchemaError("values")
        plan["indices"] = sparse = True
        for c in ("names", "namespaces"):
            if c in t:
                if not (_is_list(t[c]) and _is_string(t[c].value_type)):
                    raise SchemaError(c)
                plan[c] = True
    for n in names:
        if n == lc or n in RESERVED:
            continue
        if _is_list(t[n]):
            if not _is_string(t[n].value_type):
                raise SchemaError(n)
            plan["ns"].append((n, "list"))
            sparse = True
        elif pt.is_map(t[n]):
            if not (_is_string(t[n].key_type) and _is_numeric(t[n].item_type)):
                raise SchemaError(n)
            plan["ns"].append((n, "map"))
            sparse = True
    if not sparse:
        for n in names:
            if n in (lc, "weight", "tag"):
                continue
            if not _is_numeric(t[n]):
                raise SchemaError(n)
            plan["wide"].append(n)
        if plan["label"] is None and not plan["wide"]:
            raise SchemaError(None)
    if plan["label"] is None:
        raise SchemaError(lc)
    return plan


def _f(x) -> float:
    return float(x) if x is not None else math.nan


def _letter(s: str) -> int:
    b = s.encode("utf-8")
    return b[0] if b else 32


def oracle_parquet(table, pairs=(), constant=True, keep_names=False, label_column=None) -> list:
    """Rows of a ``pyarrow.Table`` as :class:`Line` objects (Parquet reasons are texts);
    raises :class:`SchemaError` when the reader must reject the file."""
    plan = parquet_plan(table.schema, label_column)
    need_names = keep_names
    need_ns = keep_names or bool(pairs)
    cols = {n: table.column(n).to_pylist() for n in table.schema.names}
    out = []
    for i in range(table.num_rows):
        res = Line(i + 1)
        reasons = []
        lab = cols[plan["label"]][i]
        res.label = _f(lab)
        if lab is not None and not math.isfinite(res.label):
            reasons.append(f"label (column '{plan['label']}') is NaN or infinite")
        if plan["weight"]:
            w = cols["weight"][i]
            if w is not None:
                res.weight = float(w)
                if not math.isfinite(res.weight):
                    reasons.append("importance weight (column 'weight') is NaN or infinite")
                elif res.weight < 0:
                    reasons.append("negative importance weight (column 'weight'; use 0 to hold an "
                                   "example out of training, as VW says)")
        if plan["tag"] and cols["tag"][i] is not None:
            res.tag = cols["tag"][i].encode("utf-8")
        feats = []
        inf = False
        if plan["indices"]:
            idx = cols["indices"][i] or []
            val = cols["values"][i] or []
            nms = (cols["names"][i] or []) if plan["names"] and need_names else None
            nss = (cols["namespaces"][i] or []) if plan["namespaces"] and need_ns else None
            if len(idx) != len(val):
                reasons.append("Parquet columns 'indices' and 'values' have lists of different lengths")
                idx = val = []
            else:
                for lst, c in ((nss, "namespaces"), (nms, "names")):
                    if lst is not None and len(lst) != len(idx):
                        raise SchemaError(c)
            if any(x is None for x in idx):
                reasons.append("Parquet column 'indices' holds a null index")
            if any(x is not None and x < 0 for x in idx):
                reasons.append("Parquet column 'indices' holds a negative index; expected "
                               "feature hashes in [0, 2**32)")
            for k, (x, v) in enumerate(zip(idx, val)):
                v = _f(v)
                if v == 0.0 or math.isnan(v):
                    continue
                inf |= math.isinf(v)
                ns = nss[k] if nss is not None else None
                name = None
                if nms is not None:
                    name = (nms[k] or "").encode("utf-8")
                    ns = ns.encode("utf-8") if ns else None
                else:
                    ns = None
                letter = _letter(nss[k] or "") if nss is not None else 32
                feats.append(Feature((x or 0) & M32, v, letter, name, ns))
        for n, kind in plan["ns"]:
            seed = namespace_hash(n.encode("utf-8"))
            row = cols[n][i] or []
            for item in row:
                if kind == "list":
                    if item is None:
                        continue
                    s, v = item, 1.0
                else:
                    s, v = item[0], _f(item[1])
                    if v == 0.0 or math.isnan(v):
                        continue
                    inf |= math.isinf(v)
                b = s.encode("utf-8")
                feats.append(Feature(hashstring(b, seed), v, _letter(n),
                                     b if keep_names else None,
                                     n.encode("utf-8") if keep_names else None))
        for n in plan["wide"]:
            v = _f(cols[n][i])
            if v == 0.0 or math.isnan(v):
                continue
            inf |= math.isinf(v)
            feats.append(Feature(hashstring(n.encode("utf-8"), 0), v, 32,
                                 n.encode("utf-8") if keep_names else None, None))
        if inf:
            reasons.append("a feature value is infinite")
        try:
            _finish(res, feats, pairs, constant)
        except _Bad:
            reasons.append("-q interaction value (product of two feature values) overflows the "
                           "double range")
        if reasons:
            res.error = reasons[0]
            res.features = []
        out.append(res)
    return out


# ------------------------------------------------------------------------------ reader side

def batch_lines(batches, keep_names=False) -> tuple:
    """Reader output -> (list of :class:`Line` for the examples, list of (source, line, reason))."""
    got, errors = [], []
    for b in batches:
        errors += list(b.extra.get("errors", []))
        for i in range(b.n):
            lo, hi = int(b.offsets[i]), int(b.offsets[i + 1])
            tag = None
            if b.tag_start is not None and b.tag_start[i] >= 0:
                tag = bytes(b.text[b.tag_start[i]:b.tag_end[i]])
            feats = []
            for k in range(lo, hi):
                name = ns = None
                if keep_names and b.name_start is not None and b.name_start[k] >= 0:
                    name = bytes(b.text[b.name_start[k]:b.name_end[k]])
                    if b.ns_start[k] >= 0:
                        ns = bytes(b.text[b.ns_start[k]:b.ns_end[k]])
                feats.append(Feature(int(b.indices[k]), float(b.values[k]), 0, name, ns))
            got.append(Line(int(b.lines[i]), None, float(b.labels[i]), float(b.weights[i]), tag, feats))
    return got, errors


def _same_float(a, b, loose):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if a == b:
        return math.copysign(1, a) == math.copysign(1, b) or loose
    return loose and abs(a - b) <= 4 * math.ulp(max(abs(a), abs(b)))


def compare(expected: list, got: list, errors: list, source: str, keep_names=False,
            reason=reason_text) -> list:
    """Mismatches (strings) between the oracle's lines and the reader's output."""
    bad = []
    exp_good = {r.line: r for r in expected if r.good}
    exp_bad = {r.line: r for r in expected if not r.good}
    fragile = {r.line for r in expected if r.fragile}
    got_by_line = {}
    for g in got:
        if g.line in got_by_line:
            bad.append(f"line {g.line}: two examples")
        got_by_line[g.line] = g
    err_by_line = {}
    for src, ln, why in errors:
        if src != source:
            bad.append(f"line {ln}: error names source {src!r}, expected {source!r}")
        err_by_line[ln] = why
    for ln in sorted(set(exp_good) | set(exp_bad) | set(got_by_line) | set(err_by_line)):
        if ln in fragile:
            if (ln in got_by_line) + (ln in err_by_line) != 1:
                bad.append(f"line {ln}: fragile line neither/both parsed and reported")
            continue
        if ln in exp_bad:
            want = reason(exp_bad[ln].error)
            if ln in got_by_line:
                bad.append(f"line {ln}: oracle says malformed ({want}); reader parsed it")
            elif err_by_line.get(ln) != want:
                bad.append(f"line {ln}: reason {err_by_line.get(ln)!r}, oracle {want!r}")
            continue
        if ln not in exp_good:
            bad.append(f"line {ln}: reader made an example/error of a blank line")
            continue
        if ln in err_by_line:
            bad.append(f"line {ln}: reader rejected a good line ({err_by_line[ln]})")
            continue
        if ln not in got_by_line:
            bad.append(f"line {ln}: good line missing from the output")
            continue
        e, g = exp_good[ln], got_by_line[ln]
        loose = e.inexact
        if not _same_float(e.label, g.label, loose):
            bad.append(f"line {ln}: label {g.label!r}, oracle {e.label!r}")
        if not _same_float(e.weight, g.weight, loose):
            bad.append(f"line {ln}: weight {g.weight!r}, oracle {e.weight!r}")
        if e.tag != g.tag:
            bad.append(f"line {ln}: tag {g.tag!r}, oracle {e.tag!r}")
        if len(e.features) != len(g.features):
            bad.append(f"line {ln}: {len(g.features)} features, oracle {len(e.features)}")
            continue
        for k, (fe, fg) in enumerate(zip(e.features, g.features)):
            if fe.h != fg.h or not _same_float(fe.v, fg.v, loose):
                bad.append(f"line {ln}: feature {k} = ({fg.h}, {fg.v!r}), oracle ({fe.h}, {fe.v!r})")
                break
            if keep_names and (fe.name, fe.ns) != (fg.name, fg.ns):
                bad.append(f"line {ln}: feature {k} name {(fg.ns, fg.name)!r}, oracle "
                           f"{(fe.ns, fe.name)!r}")
                break
    return bad


@dataclass
class CaseResult:
    good: int = 0
    bad: int = 0
    mismatches: list = field(default_factory=list)
    crashes: list = field(default_factory=list)

    def add(self, other: "CaseResult"):
        self.good += other.good
        self.bad += other.bad
        self.mismatches += other.mismatches
        self.crashes += other.crashes


def _crash(where, exc):
    return f"{where}: {type(exc).__name__}: {exc}\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])


@contextlib.contextmanager
def kernel_backend(use_c: bool):
    """Run the block with the kernel seam bound to the C fast path (``use_c``, when the library
    loads) or to numba, then restore the session's binding (tests/conftest.py)."""
    from streamlearn import kernels

    saved = (kernels._use_c, kernels._lib_path)
    kernels.configure(use_c=use_c, lib_path=saved[1])
    try:
        yield
    finally:
        kernels.configure(*saved)


def check_text(data: bytes, fmt: str, pairs=(), constant=True, keep_names=False,
               chunk_bytes=1 << 20, name="fuzz.txt", strict=None, path=None,
               reader=None, use_c=False) -> CaseResult:
    """Read ``data`` as the readers do and compare with the oracle: ``reader`` is
    ``"memory"`` (``text_batches`` over the bytes, the default without ``path``), ``"file"``
    (``read_batches`` of ``path``, which holds ``data``; the default with ``path``) or
    ``"parallel"`` (``read_batches`` of ``path`` with 2 parsing threads, as the CLI reads).
    ``strict`` (default: yes) also checks that a strict read stops with ``FILE:LINE: reason``
    at the first bad line. ``use_c``: parse with the C fast path, else with numba
    (:func:`kernel_backend`)."""
    from dataclasses import replace

    from streamlearn.errors import InputError
    from streamlearn.io import ReaderConfig, read_batches
    from streamlearn.io.source import text_batches

    reader = reader or ("memory" if path is None else "file")
    qs = tuple(bytes(p) for p in pairs)
    expected = oracle_text(data, fmt, qs, constant)
    res = CaseResult(sum(r.good for r in expected), sum(not r.good for r in expected))
    where = f"{fmt} file of {len(data)} bytes ({reader} reader)"
    cfg = ReaderConfig(fmt=fmt, quadratic=qs, constant=constant, keep_names=keep_names,
                       chunk_bytes=chunk_bytes)

    def read(c):
        with kernel_backend(use_c):
            if reader == "file":
                return list(read_batches([str(path)], c))
            if reader == "parallel":
                return list(read_batches([str(path)], replace(c, parse_threads=2)))
            return list(text_batches(io.BytesIO(data), name, c, fmt))

    source = str(path) if reader != "memory" else name
    try:
        got, errors = batch_lines(read(cfg), keep_names)
    except Exception as e:  # noqa: BLE001 - any exception is a finding
        res.crashes.append(_crash(where, e))
        return res
    res.mismatches += [f"{where}: {m}" for m in compare(expected, got, errors, source, keep_names)]
    if strict is not False:
        cfg.strict = True
        first_bad = next((r for r in expected if not r.good), None)
        sure = not any(r.fragile for r in expected)  # else only "no crash" is checked
        try:
            read(cfg)
            if first_bad is not None and sure:
                res.mismatches.append(f"{where}: strict read did not stop at line {first_bad.line}")
        except InputError as e:
            msg = str(e)
            if sure and first_bad is None:
                res.mismatches.append(f"{where}: strict read failed on good input: {msg}")
            elif sure and msg != f"{source}:{first_bad.line}: {reason_text(first_bad.error)}":
                res.mismatches.append(f"{where}: strict error {msg!r}, oracle line "
                                      f"{first_bad.line}: {reason_text(first_bad.error)}")
        except Exception as e:  # noqa: BLE001
            res.crashes.append(_crash(where + " (strict)", e))
    return res


def check_parquet(table, path, pairs=(), constant=True, keep_names=False, batch_rows=None,
                  label_column=None, use_c=False) -> CaseResult:
    """Write ``table`` to ``path``, read it back with the Parquet reader (plain and strict;
    ``use_c``: with the C kernels, else numba) and compare with :func:`oracle_parquet`."""
    import pyarrow.parquet as pq

    from streamlearn.errors import InputError
    from streamlearn.io import ReaderConfig, read_batches

    qs = tuple(bytes(p) for p in pairs)
    where = f"parquet {table.schema}".replace("\n", "; ")
    res = CaseResult()
    try:
        pq.write_table(table, path)
        table = pq.read_table(path)  # the oracle sees what the file holds
    except Exception:  # noqa: BLE001 - a table pyarrow cannot write is not a reader case
        return res
    try:
        expected = oracle_parquet(table, qs, constant, keep_names, label_column)
        schema_error = None
    except SchemaError as e:
        expected, schema_error = [], e
    res.good = sum(r.good for r in expected)
    res.bad = sum(not r.good for r in expected) + (schema_error is not None)

    def read(strict):
        cfg = ReaderConfig(fmt="parquet", quadratic=qs, constant=constant,
                           keep_names=keep_names, strict=strict, parquet_batch_rows=batch_rows or None,
                           label_column=label_column)
        with kernel_backend(use_c):
            return list(read_batches([str(path)], cfg))

    for strict in (False, True):
        try:
            batches = read(strict)
        except InputError as e:
            msg = str(e)
            if schema_error is not None:
                col = schema_error.column
                if not msg.startswith(f"{path}: ") or (col is not None and f"'{col}'" not in msg):
                    res.mismatches.append(f"{where}: error {msg!r}, oracle: column {col!r}")
                continue
            first_bad = next((r for r in expected if not r.good), None)
            if strict and first_bad is not None:
                want = f"{path}:{first_bad.line}: {first_bad.error}"
                if msg != want:
                    res.mismatches.append(f"{where}: strict error {msg!r}, oracle {want!r}")
            else:
                res.mismatches.append(f"{where}: reader failed ({msg}); oracle: rows are readable")
            continue
        except Exception as e:  # noqa: BLE001
            res.crashes.append(_crash(where, e))
            continue
        if schema_error is not None:
            res.mismatches.append(f"{where}: reader accepted it; oracle: reject (column "
                                  f"{schema_error.column!r})")
            continue
        if strict:
            if any(not r.good for r in expected):
                res.mismatches.append(f"{where}: strict read did not stop")
            continue
        got, errors = batch_lines(batches, keep_names)
        res.mismatches += [f"{where}: {m}" for m in
                           compare(expected, got, errors, str(path), keep_names, reason=lambda s: s)]
    return res


# ------------------------------------------------------------------------------ generators

GOOD_NUMBERS = [b"1", b"-1", b"0", b"+1", b"0.5", b"-2.25", b".5", b"5.", b"-0", b"1e-5",
                b"2.5E+3", b"1e22", b"123456789012345678", b"3.141592653589793", b"0.1",
                b"1e308", b"-1.7976931348623157e308", b"1e-300", b"00012", b"7e0", b"1e-400",
                b"-1e-999", b"1234567890123456789012345", b"0.000000000000000000000000001"]
BAD_NUMBERS = [b"", b"+", b"-", b".", b"e5", b"1e", b"1e+", b"--1", b"1.2.3", b"0x10",
               b"1_000", b"1,5", b"1e5.5", b"abc", b"1f", b"infx", b"nann", b"in", b"1..",
               b"\xff", b"1\x00", b"\xc3\xa9", b"'", b"#", b"1:2"]
NONFINITE_NUMBERS = [b"nan", b"NaN", b"-nan", b"inf", b"-inf", b"+Inf", b"INF", b"infinity",
                     b"-Infinity", b"1e400", b"-1e309", b"2e308", b"1e99999999999",
                     b"99999999999999999999e300"]
NAMES = [b"a", b"x", b"f1", b"12", b"0", b"00042", b"4294967297", b"caf\xc3\xa9",
         b"\xe6\x97\xa5\xe6\x9c\xac", b"\xff\xfe", b"\xc3", b"a\x00b", b"\x00", b"\x01x",
         b"x\x1f", b"'q", b"#c", b"-3", b"1.5", b"Constant", b"", b"a'b", b"\xed\xa0\x80"]
NAMESPACES = [b"a", b"b", b"ab", b"alpha", b"c", b"3", b"\xc3\xa9ns", b"\x00", b"'", b"#", b""]
BLANKS = [b" ", b" ", b" ", b"\t", b"  ", b"\r", b"\x0b", b"\x0c", b" \t "]
INTERESTING_BYTES = b"|: \t\r\x00\xff'#.-+eE0123456789\x0b\x0c\x80\xc3"
#: -q pairs the tests use (namespace first bytes; LIBSVM features are in ' ')
PAIRS = [b"ab", b"aa", b"  ", b" a", b"\xc3\xc3", b"cc", b"\x00a"]


def gen_number(r: random.Random, p_bad=0.015, p_nonfinite=0.015, tame=False) -> bytes:
    """A number token: mostly good, sometimes bad or non-finite; ``tame``: good numbers stay
    within [-10, 10] (files a learner can take whole, for the CLI checks)."""
    x = r.random()
    if x < p_bad:
        return r.choice(BAD_NUMBERS)
    if x < p_bad + p_nonfinite:
        return r.choice(NONFINITE_NUMBERS)
    k = r.random()
    if tame:
        return r.choice([b"1", b"-1", b"0", b"0.5", b".25", b"2.", b"-0", b"1e-3", b"+3",
                         repr(round(r.uniform(-10, 10), 4)).encode()])
    if k < 0.3:
        return r.choice(GOOD_NUMBERS)
    if k < 0.55:
        return str(r.randint(-5, 5)).encode()
    if k < 0.85:
        return repr(r.uniform(-10, 10)).encode()
    # a random decimal string: up to 20 digits, maybe an exponent
    nd = r.randint(1, 20)
    digs = "".join(r.choice("0123456789") for _ in range(nd))
    cut = r.randint(0, nd)
    s = r.choice(["", "-", "+"]) + digs[:cut] + ("." if r.random() < 0.6 else "") + digs[cut:]
    if r.random() < 0.4:
        s += r.choice("eE") + r.choice(["", "-", "+"]) + str(r.randint(0, r.choice([3, 30, 300])))
    return s.encode()


_gen_number = gen_number


def _name(r):
    return r.choice(NAMES) if r.random() < 0.5 else f"f{r.randrange(100)}".encode()


def gen_vw_line(r: random.Random, max_features=8, tame=False) -> bytes:
    """A random VW text line, mostly well formed."""
    def gen_number(r):
        return _gen_number(r, tame=tame)

    parts = []
    k = r.random()
    if k < 0.05:
        return r.choice([b"", b"   ", b"\t", b"\r"])
    label = []
    if r.random() < 0.9:
        label.append(gen_number(r))
        if r.random() < 0.3:
            label.append(gen_number(r))
            if r.random() < 0.3:
                label.append(gen_number(r))
                if r.random() < 0.1:
                    label.append(gen_number(r))
    if r.random() < 0.3:
        label.append(b"'" + _name(r))
    parts.append(b" ".join(label))
    if r.random() < 0.1 and label:
        parts.append(b"tag" + str(r.randrange(9)).encode())  # touching the bar
    else:
        parts.append(r.choice(BLANKS))
    for _ in range(r.choice([0, 1, 1, 2, 2, 3])):
        ns = r.choice([b"", b"a", b"a", b"b", b"b", b"ab"]) if r.random() < 0.7 else r.choice(NAMESPACES)
        parts.append(b"|")
        if ns:
            parts.append(ns)
            if r.random() < 0.15:
                parts.append(b":" + gen_number(r))
        for _ in range(r.randrange(max_features + 1)):
            parts.append(r.choice(BLANKS))
            parts.append(_name(r))
            if r.random() < 0.5:
                parts.append(b":" + gen_number(r))
        if r.random() < 0.7:
            parts.append(r.choice(BLANKS))
    if r.random() < 0.02:
        parts = [b"|"] + parts[2:]  # no label section at all
    return b"".join(parts)


def gen_libsvm_line(r: random.Random, max_features=8, tame=False) -> bytes:
    """A random LIBSVM line, mostly well formed."""
    def gen_number(r):
        return _gen_number(r, tame=tame)

    if r.random() < 0.05:
        return r.choice([b"", b"  ", b"# comment only", b"\t# x"])
    parts = [gen_number(r)]
    if r.random() < 0.1:
        parts.append(b" qid:" + str(r.randrange(5)).encode())
    for _ in range(r.randrange(max_features + 1)):
        parts.append(r.choice(BLANKS))
        idx = str(r.choice([r.randrange(50), r.randrange(1 << 40)])).encode()
        if r.random() < 0.01:
            idx = r.choice([b"-3", b"a", b"1.5", b"", b"+4", b"qid", b"0x1"])
        parts.append(idx)
        if r.random() < 0.98:
            parts.append(b":" + gen_number(r))
    if r.random() < 0.1:
        parts.append(b" # " + _name(r))
    return b"".join(parts)


def mutate(r: random.Random, line: bytes, tame=False) -> bytes:
    """One random damage: a byte inserted / deleted / replaced, a number swapped for a bad or
    non-finite one, a stray ``|`` or ``:``, invalid UTF-8, a NUL, a cut (``tame``: none that
    can turn a number into a huge one)."""
    k = r.choice([3, 4, 5, 6, 7]) if tame else r.randrange(9)
    pos = r.randint(0, len(line))
    if k == 0:
        return line[:pos] + bytes([r.choice(INTERESTING_BYTES)]) + line[pos:]
    if k == 1 and line:
        end = min(len(line), pos + r.randint(1, 4))
        return line[:pos] + line[end:]
    if k == 2 and line:
        pos = min(pos, len(line) - 1)
        return line[:pos] + bytes([r.randrange(256)]) + line[pos + 1:]
    if k == 3:
        toks = re.split(rb"([ \t|:]+)", line)
        nums = [i for i, t in enumerate(toks) if _NUMBER.fullmatch(t)]
        if nums:
            i = r.choice(nums)
            toks[i] = r.choice(BAD_NUMBERS + NONFINITE_NUMBERS)
            return b"".join(toks)
        return line + b" " + r.choice(NONFINITE_NUMBERS)
    if k == 4:
        return line[:pos] + r.choice([b"|", b":", b"||", b"::", b" | ", b" :", b": "]) + line[pos:]
    if k == 5:
        return line[:pos] + r.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
                                      b"\xc0\xaf", b"\xef\xbb\xbf"]) + line[pos:]
    if k == 6:
        return line[:pos] + b"\x00" + line[pos:]
    if k == 7:
        return line[:pos]
    a, b = sorted((pos, r.randint(0, len(line))))
    return line[:b] + line[a:b] + line[b:]


def gen_lines(r: random.Random, fmt: str, n: int, p_mutate=0.25, tame=False) -> list:
    gen = gen_vw_line if fmt == "vw" else gen_libsvm_line
    out = []
    for _ in range(n):
        line = gen(r, tame=tame)
        while r.random() < p_mutate:
            line = mutate(r, line, tame)
        out.append(line.replace(b"\n", b" "))
    return out


def join_lines(r: random.Random, lines: list) -> bytes:
    """Lines -> file bytes: LF or CRLF (or a mix), with or without a final newline."""
    style = r.choice(["lf", "lf", "crlf", "mixed"])
    out = []
    for line in lines:
        crlf = style == "crlf" or (style == "mixed" and r.random() < 0.5)
        out.append(line + (b"\r\n" if crlf else b"\n"))
    data = b"".join(out)
    if data and r.random() < 0.3:
        data = data.rstrip(b"\n")  # no final newline (maybe a bare CR left)
    return data


def long_line(fmt: str, size=1 << 20, bad_at_end=False) -> bytes:
    """A ~``size``-byte line (many features)."""
    parts, n, i = [b"1 |a" if fmt == "vw" else b"1"], 4, 0
    while n < size:
        t = (b" f%d:%d" % (i, i % 7 + 1)) if fmt == "vw" else (b" %d:%d" % (i, i % 7 + 1))
        parts.append(t)
        n += len(t)
        i += 1
    if bad_at_end:
        parts.append(b" x:nan" if fmt == "vw" else b" 5:inf")
    return b"".join(parts)


def random_config(r: random.Random, fmt: str) -> dict:
    pool = PAIRS if fmt != "libsvm" else [b"  "]
    pairs = tuple(r.sample(pool, r.randint(0, min(2, len(pool))))) if r.random() < 0.4 else ()
    return dict(pairs=pairs, constant=r.random() < 0.7, keep_names=r.random() < 0.3,
                chunk_bytes=r.choice([1, 7, 64, 333, 4096, 1 << 20]))


# ------------------------------------------------------------------------------ Parquet tables

def _rand_float(r):
    return r.choice([1.0, -1.0, 0.0, 0.5, 2.0, 3.25, 1e-300, 1e300, 1e200, -1e200,
                     math.nan, math.inf, -math.inf, None, None, r.uniform(-5, 5), r.uniform(-5, 5)])


def _rand_str(r):
    return r.choice(["x", "y", "12", "", " ", "café", "日本", "a b", "0042", None, f"w{r.randrange(9)}"])


def gen_parquet_table(r: random.Random, n_rows=None):
    """A random table in one of the accepted schemas, then 0-2 schema mutations and noisy
    values (nulls, NaN, inf, negative / null indices, lists of different lengths)."""
    import pyarrow as pa

    n = n_rows if n_rows is not None else r.randint(0, 12)
    kind = r.choice(["indices", "ns", "wide", "mixed"])
    cols = {}
    cols["label"] = pa.array([_rand_float(r) if r.random() < 0.3 else float(r.choice([-1, 1]))
                              for _ in range(n)], pa.float64())
    if r.random() < 0.5:
        cols["weight"] = pa.array([_rand_float(r) if r.random() < 0.3 else 1.0 for _ in range(n)],
                                  pa.float64())
    if r.random() < 0.4:
        cols["tag"] = pa.array([_rand_str(r) for _ in range(n)], pa.string())
    if kind in ("indices", "mixed"):
        idx, val, nms, nss = [], [], [], []
        for _ in range(n):
            k = r.randrange(5)
            if r.random() < 0.05:
                idx.append(None), val.append(None), nms.append(None), nss.append(None)
                continue
            row_i = [r.choice([r.randrange(100), r.randrange(1 << 32)]) for _ in range(k)]
            if r.random() < 0.05 and row_i:
                row_i[0] = r.choice([-1, None])
            row_v = [_rand_float(r) if r.random() < 0.3 else 1.0 for _ in range(k)]
            if r.random() < 0.05:
                row_v = row_v + [1.0]
            idx.append(row_i)
            val.append(row_v)
            nms.append([f"n{j}" for j in range(k)])
            nss.append([r.choice(["a", "b", "", "é"]) for _ in range(k)])
        cols["indices"] = pa.array(idx, pa.list_(pa.int64()))
        cols["values"] = pa.array(val, pa.list_(pa.float64()))
        if r.random() < 0.5:
            cols["names"] = pa.array(nms, pa.list_(pa.string()))
            cols["namespaces"] = pa.array(nss, pa.list_(pa.string()))
    if kind in ("ns", "mixed"):
        for name in r.sample(["a", "b", "ab", "é", "", " "], r.randint(1, 2)):
            if r.random() < 0.6:
                cols[name] = pa.array([[_rand_str(r) for _ in range(r.randrange(4))]
                                       if r.random() > 0.1 else None for _ in range(n)],
                                      pa.list_(pa.string()))
            else:
                cols[name] = pa.array([[(_rand_str(r) or "k", _rand_float(r))
                                        for _ in range(r.randrange(3))] for _ in range(n)],
                                      pa.map_(pa.string(), pa.float64()))
    if kind == "wide":
        for name in r.sample(["x", "y1", "12", "é", "z z"], r.randint(1, 3)):
            typ = r.choice([pa.float64(), pa.float32(), pa.int32(), pa.bool_()])
            vals = [_rand_float(r) for _ in range(n)]
            if pa.types.is_integer(typ):
                vals = [None if v is None or not math.isfinite(v) else int(max(-2**31, min(2**31 - 1, v)))
                        for v in vals]
            elif pa.types.is_boolean(typ):
                vals = [None if v is None else bool(v == v and v) for v in vals]
            cols[name] = pa.array(vals, typ)
    table = pa.table(cols)
    for _ in range(r.choice([0, 0, 0, 1, 1, 2])):
        table = mutate_schema(r, table)
    return table


def mutate_schema(r: random.Random, table):
    """One schema mutation: a column of another type, dropped, renamed or duplicated."""
    import pyarrow as pa

    n = table.num_rows
    names = table.schema.names
    k = r.randrange(8)
    if k == 0 and names:  # drop a column (the label, values, ...)
        return table.remove_column(r.randrange(len(names)))
    if k == 1 and names:  # rename one
        i = r.randrange(len(names))
        new = list(names)
        new[i] = r.choice(["label", "y", "weight", "tag", "indices", "values", "names", "zz"])
        return table.rename_columns(new)
    if k == 2 and names:  # duplicate a column name
        i = r.randrange(len(names))
        return pa.Table.from_arrays(list(table.columns) + [table.column(i)],
                                    names=names + [names[i]])
    odd = {
        "string": lambda: pa.array([str(i) for i in range(n)], pa.string()),
        "binary": lambda: pa.array([b"\xff" for _ in range(n)], pa.binary()),
        "null": lambda: pa.nulls(n),
        "bool": lambda: pa.array([i % 2 == 0 for i in range(n)], pa.bool_()),
        "int8": lambda: pa.array([i % 3 - 1 for i in range(n)], pa.int8()),
        "uint64": lambda: pa.array([2**64 - 1 - i for i in range(n)], pa.uint64()),
        "decimal": lambda: pa.array([Decimal(i) / 4 for i in range(n)], pa.decimal128(10, 2)),
        "float16?": lambda: pa.array([float(i) for i in range(n)], pa.float32()),
        "list<string>": lambda: pa.array([["s", None] for _ in range(n)], pa.list_(pa.string())),
        "list<int>": lambda: pa.array([[1, -2] for _ in range(n)], pa.list_(pa.int64())),
        "list<uint32>": lambda: pa.array([[1, 2**32 - 1] for _ in range(n)], pa.list_(pa.uint32())),
        "large_list<int>": lambda: pa.array([[3] for _ in range(n)], pa.large_list(pa.int32())),
        "list<float>": lambda: pa.array([[1.5] for _ in range(n)], pa.list_(pa.float64())),
        "list<bool>": lambda: pa.array([[True] for _ in range(n)], pa.list_(pa.bool_())),
        "list<list<string>>": lambda: pa.array([[["a"]] for _ in range(n)],
                                               pa.list_(pa.list_(pa.string()))),
        "large_list<large_string>": lambda: pa.array([["q"] for _ in range(n)],
                                                     pa.large_list(pa.large_string())),
        "map<string,float>": lambda: pa.array([[("k", 2.0)] for _ in range(n)],
                                              pa.map_(pa.string(), pa.float64())),
        "map<string,string>": lambda: pa.array([[("k", "v")] for _ in range(n)],
                                               pa.map_(pa.string(), pa.string())),
        "map<int,float>": lambda: pa.array([[(1, 2.0)] for _ in range(n)],
                                           pa.map_(pa.int32(), pa.float64())),
        "struct": lambda: pa.array([{"a": 1, "b": "x"} for _ in range(n)]),
        "timestamp": lambda: pa.array([i for i in range(n)], pa.timestamp("s")),
        "dictionary": lambda: pa.array([str(i % 2) for i in range(n)]).dictionary_encode(),
        "fixed_size_list": lambda: pa.array([[1, 2] for _ in range(n)], pa.list_(pa.int64(), 2)),
    }
    typ = r.choice(sorted(odd))
    col = odd[typ]()
    target = r.choice(names + ["label", "indices", "values", "names", "namespaces", "weight",
                               "tag", "extra"]) if names else "label"
    if target in names:
        return table.set_column(names.index(target), target, col)
    return table.append_column(target, col)
