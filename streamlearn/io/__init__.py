"""Input/output: readers that turn bytes into :class:`~streamlearn.batch.Batch` objects, and
VW-compatible hashing.

>>> from streamlearn.io import ReaderConfig, read_batches
>>> for batch in read_batches(["a.vw", "-"], ReaderConfig(quadratic=("ab",))):  # doctest: +SKIP
...     ...

Formats: VW text (:mod:`.vw_text`), LIBSVM/SVMlight (:mod:`.libsvm`), plain or gzip (by magic
bytes), files or standard input (``"-"``); more formats plug in with
:func:`~streamlearn.io.source.register_reader`.
"""
from . import libsvm, vw_text  # noqa: F401  (register the text readers)
from .source import ReaderConfig, read_batches, register_reader

__all__ = ["ReaderConfig", "read_batches", "register_reader"]
