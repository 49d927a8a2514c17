"""LIBSVM / SVMlight text format reader.

Each line: ``label index:value ...`` with optional ``qid:N`` (ignored) and a trailing
``# comment`` (ignored). The feature "name" is the index's digits hashed in the default
namespace, so its hash is ``int(index)`` (mod 2**32): exactly what VW gives for the same line
written as ``label | index:value``. An index past 2**63 - 1 overflows and makes the line
malformed, as LIBSVM's own reader (``strtol``, ERANGE) refuses it. Labels are kept as written (``+1``, ``-1``, ``0``, ``3``);
learners map them for their loss. Zero values are dropped (as VW drops zero features).
Malformed lines (non-numeric label or value, a NaN or infinite label or value such as ``nan``,
``inf`` or ``1e400``, a token without ``:``, a non-integer index) are skipped and reported, or
raise with ``strict``.
"""
from __future__ import annotations

from typing import Iterator

from ..batch import Batch
from .source import ReaderConfig, parse_text, register_reader, text_batches

__all__ = ["read_libsvm", "parse_libsvm"]


def read_libsvm(stream, name: str, cfg: ReaderConfig) -> Iterator[Batch]:
    """Yield batches from a binary stream of LIBSVM text."""
    return text_batches(stream, name, cfg, "libsvm")


def parse_libsvm(text: str | bytes, cfg: ReaderConfig | None = None,
                 name: str = "<string>") -> Batch:
    """Parse LIBSVM text held in memory into one batch (for tests and the Python API)."""
    return parse_text(text, cfg, name, "libsvm")


register_reader("libsvm", read_libsvm)
