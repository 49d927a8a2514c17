"""What a run writes besides its model: the predictions file (VW's ``-p``) and the metrics JSON.

:class:`PredictionSink` writes ``pred [tag]`` lines as the predictions are produced, so
predictions already made survive a later input error, and stops quietly when a reader of
stdout closes the pipe (``predict ... | head``). :func:`write_metrics` writes the run's
summary as JSON, atomically (``-`` = stdout).
"""
from __future__ import annotations

import json
import os
import stat
import sys

import numpy as np

from .errors import InputError

__all__ = ["PredictionSink", "silence_stdout", "write_metrics"]


def _is_regular_file(path) -> bool:
    """Whether ``path`` itself (not a symlink's target) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def silence_stdout():
    """After a closed pipe (``| head``): point stdout at /dev/null so exit stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class PredictionSink:
    """Writes predictions (``pred [tag]`` per line, as VW's ``-p``) to ``path`` (``-``:
    stdout) as they are produced. ``link`` is ``identity`` or ``logistic`` (the written value
    is the probability); ``multiclass`` predictions are class ids, or, when the call passes
    ``probs`` (``--probabilities``), every class's probability in VW's layout
    ``1:p1 2:p2 ... K:pK`` (``%g``, as VW's stream output)."""

    def __init__(self, path, link, multiclass):
        self.path = path
        self.link = link
        self.multiclass = multiclass
        self.f = None
        self.broken = False
        self.count = 0

    def open(self):
        if self.path == "-":
            self.f = sys.stdout
        else:
            try:
                self.f = open(self.path, "w", buffering=1 << 20)
            except OSError as e:
                raise InputError(f"{self.path}: cannot write predictions: {e.strerror or e}") from None

    def __call__(self, batch, pred, probs=None):
        if self.broken:
            return
        if probs is not None:
            cls = [f"{c}:" for c in range(1, probs.shape[1] + 1)]
            vals = [" ".join(c + "%g" % p for c, p in zip(cls, row)) for row in probs.tolist()]
        elif self.multiclass:
            vals = [str(int(p)) for p in pred.tolist()]
        else:
            with np.errstate(over="ignore"):  # exp(-p) = inf for p < -709: the probability is 0.0
                p = 1.0 / (1.0 + np.exp(-pred)) if self.link == "logistic" else pred
            vals = list(map("{:.9g}".format, p.tolist()))
        if batch.tag_start is not None and np.any(batch.tag_start >= 0):
            tags = batch.tags()
            vals = [v if t is None else f"{v} {t}" for v, t in zip(vals, tags)]
        try:
            self.f.write("\n".join(vals))
            self.f.write("\n")
            self.count += len(vals)
        except BrokenPipeError:
            self.broken = True
            silence_stdout()

    def close(self, failed=False):
        """Flush and close; after a failed run that produced no prediction at all, remove
        the (empty) file so that no output is left behind. Predictions already written are
        always kept."""
        if self.f is None:
            return
        try:
            self.f.flush()
        except BrokenPipeError:
            self.broken = True
            silence_stdout()
        if self.f is not sys.stdout:
            self.f.close()
            if failed and self.count == 0 and _is_regular_file(self.path):
                # only a regular file: -p /dev/stdout, a FIFO or a device is never removed
                # (as root, unlinking /dev/stdout would replace it for every later process)
                try:
                    os.unlink(self.path)
                except OSError:
                    pass


def write_metrics(summary: dict, path: str) -> None:
    """The run's summary as JSON (sorted keys) to ``path``, written atomically; ``-``: stdout."""
    text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    from .io.model_file import atomic_writer

    with atomic_writer(path) as f:
        f.write(text.encode())
