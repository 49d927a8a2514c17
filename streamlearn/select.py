"""Feature selection output: the top-k features of a BEAR / MISSION learner.

``select_rows(learner, top_k)`` gives one :class:`SelectedFeature` per feature -- its original
``namespace^name`` (as written in the input; ``""`` if the reader kept no names; names longer
than 64 bytes are truncated and end in ``...``), its 32-bit hash, its weight (QUERYed from the
sketch now) and, for ``--oaa`` models, its class (1..K). Rows are sorted by class, then by
``|weight|`` descending; ``top_k`` applies per class. ``format_rows`` renders them as TSV
(with a header line) or JSON; ``write_selection`` writes them to a file (``-`` = stdout).

This is what ``streamlearn select`` and ``train --select_out`` print.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

from .batch import CONSTANT_HASH

__all__ = ["SelectedFeature", "select_rows", "format_rows", "write_selection", "supports_selection"]


@dataclass(frozen=True)
class SelectedFeature:
    name: str
    hash: int
    weight: float
    cls: int | None = None  # 1..K for multiclass models


def supports_selection(learner) -> bool:
    """True for learners with a top-k set (BEAR, MISSION): ``Learner.selects_features``."""
    return learner.selects_features


def select_rows(learner, top_k: int | None = None, refresh: bool = True) -> list[SelectedFeature]:
    """The selected features of ``learner`` (at most ``top_k`` per class; all heap members
    when ``None``)."""
    if not supports_selection(learner):
        raise ValueError(f"--algo {learner.name} does not select features "
                         "(use bear or mission)")
    if top_k is not None and top_k < 1:
        raise ValueError("--top_k must be at least 1")
    cls, keys, w, names = learner.top_features(refresh=refresh)
    multi = learner.multiclass
    rows, count = [], {}
    for c, h, x, nm in zip(cls.tolist(), keys.tolist(), w.tolist(), names):
        count[c] = count.get(c, 0) + 1
        if top_k is not None and count[c] > top_k:
            continue
        if not nm and int(h) == CONSTANT_HASH:
            nm = "Constant"  # the bias feature has no span in the input (VW's audit name)
        rows.append(SelectedFeature(nm, int(h), float(x), c + 1 if multi else None))
    return rows


def format_rows(rows: list[SelectedFeature], fmt: str = "tsv", ascii_json: bool = False) -> str:
    """TSV (header ``name hash weight [class]``, weights with ``repr`` precision) or JSON (a
    list of objects; ``ascii_json``: non-ASCII characters as ``\\uXXXX`` escapes, still the
    same JSON)."""
    multi = any(r.cls is not None for r in rows)
    if fmt == "json":
        out = []
        for r in rows:
            d = asdict(r)
            if multi:
                d["class"] = d.pop("cls")
            else:
                d.pop("cls")
            out.append(d)
        return json.dumps(out, indent=1, ensure_ascii=ascii_json) + "\n"
    if fmt != "tsv":
        raise ValueError(f"unknown format {fmt!r}; choose tsv or json")
    lines = ["name\thash\tweight" + ("\tclass" if multi else "")]
    for r in rows:
        nm = r.name.replace("\t", " ").replace("\n", " ")
        lines.append(f"{nm}\t{r.hash}\t{r.weight!r}" + (f"\t{r.cls}" if multi else ""))
    return "\n".join(lines) + "\n"


def _stdout_is_utf8() -> bool:
    import codecs

    try:
        return codecs.lookup(getattr(sys.stdout, "encoding", None) or "utf-8").name == "utf-8"
    except LookupError:
        return False


def write_selection(learner, path, top_k: int | None = None, fmt: str = "tsv") -> int:
    """Write the selection of ``learner`` to ``path`` (a file name, ``-`` for stdout, or a
    binary file); returns the row count. Files are UTF-8 (written atomically:
    :class:`~streamlearn.io.model_file.atomic_writer`); on a standard output whose encoding is
    not UTF-8 (``LANG=C``, ``PYTHONIOENCODING=ascii``) the names keep every character, JSON as
    ``\\uXXXX`` escapes and TSV as backslash escapes (``caf\\xe9``)."""
    rows = select_rows(learner, top_k)
    if path == "-":
        utf8 = _stdout_is_utf8()
        text = format_rows(rows, fmt, ascii_json=not utf8)
        enc = getattr(sys.stdout, "encoding", None) or "utf-8"
        data = text.encode(enc, "backslashreplace")
        sys.stdout.flush()
        buf = getattr(sys.stdout, "buffer", None)
        if buf is None:
            sys.stdout.write(data.decode(enc))
        else:
            buf.write(data)
            buf.flush()
        return len(rows)
    data = format_rows(rows, fmt).encode("utf-8", "surrogateescape")
    if hasattr(path, "write"):
        path.write(data)
    else:
        from .io.model_file import atomic_writer

        with atomic_writer(path) as f:
            f.write(data)
    return len(rows)
