"""Vowpal Wabbit text format reader.

Grammar (VW 9, simple labels)::

    [label [importance [base]]] ['tag]|namespace[:weight] feature[:value] ... |other ...

* The label part may be empty (unlabeled example: label NaN); importance defaults to 1; the
  base (initial prediction) is validated and ignored. Multiclass labels like ``3`` are read
  as plain numbers.
* The tag is the last token before the first ``|`` when it starts with ``'`` (the quote is
  dropped) **or when it touches the bar** (``1 abc| f`` has tag ``abc``; as in VW, ``1| f``
  therefore has tag ``1`` and no label).
* ``|`` followed by a blank is the default namespace (hash 0); otherwise the namespace name
  runs to the first blank or ``:``, and ``:w`` multiplies the values of its features. Its
  first byte is its "letter" for ``-q``.
* A feature without ``:value`` has value 1; features whose value (times the namespace weight)
  is 0 are dropped, as VW does. A feature name runs to a blank, ``:`` or ``|``.
* Blank lines are skipped (VW uses them to end multi-line examples; there are none here).

Differences from VW, on purpose: a non-numeric feature value (``a:x``, ``a:``), a non-numeric
label / importance / namespace weight, or more than three label tokens make the line
malformed (skipped and reported, or an error with ``strict``) where VW warns and substitutes.
So does any number that is NaN or infinite (``nan``, ``inf``, ``1e400``), a feature value
whose product with its namespace weight (or with another feature, under ``-q``) overflows,
a negative importance weight (VW warns that importance weights must be non-negative, skips
the update and still adds the weight to its sums), and an example with more than
``ReaderConfig.max_example_features`` features with its interactions.

Hashing follows :mod:`streamlearn.io.hashing`; parsing is done by
:func:`streamlearn.kernels.parse_chunk` (the numba kernel
:func:`streamlearn.io._text_kernels.parse_chunk` or its C port), one compiled call per chunk.
"""
from __future__ import annotations

from typing import Iterator

from ..batch import Batch
from .source import ReaderConfig, parse_text, register_reader, text_batches

__all__ = ["read_vw", "parse_vw"]


def read_vw(stream, name: str, cfg: ReaderConfig) -> Iterator[Batch]:
    """Yield batches from a binary stream of VW text."""
    return text_batches(stream, name, cfg, "vw")


def parse_vw(text: str | bytes, cfg: ReaderConfig | None = None, name: str = "<string>") -> Batch:
    """Parse VW text held in memory into one batch (for tests and the Python API).

    The result keeps spans into its ``text`` and the list of skipped lines in
    ``extra["errors"]``."""
    return parse_text(text, cfg, name, "vw")


register_reader("vw", read_vw)
