"""What a run writes besides its learning: the predictions file (VW's ``-p``) and the metrics
JSON; the plan that checks every output before a run reads anything and writes the end-of-run
outputs together is :class:`streamlearn.io.writing.OutputPlan` (re-exported here).

:class:`PredictionSink` writes ``pred [tag]`` lines as the predictions are produced, so
predictions already made survive a later input error. It opens its file at the first
prediction (a run that fails before predicting leaves no empty file and an existing one
unchanged), writes whole lines only (on a full disk the partial line is cut off and the error
names the file), and stops quietly when the reader of a pipe goes away (``| head``), which
never stops the other outputs from being written. :func:`metrics_text` is strict JSON.
"""
from __future__ import annotations

import json
import math
import os
import stat
import sys

import numpy as np

from .errors import OutputError
from .io.writing import OutputPlan

__all__ = ["PredictionSink", "OutputPlan", "silence_stdout", "write_metrics", "metrics_text", "json_safe"]


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
    ``1:p1 2:p2 ... K:pK`` (``%g``, as VW's stream output).

    A file is opened at the first prediction (or at a successful :meth:`close`, which leaves an
    empty file for a run that predicted nothing) and each batch's lines go out in one write, so
    the file always ends with a complete line: when a write fails (a full disk), the lines of
    that batch already written are cut off and :class:`OutputError` names the file. A reader
    that closes the pipe (``EPIPE``: ``| head``, a FIFO's reader gone) ends the printing and
    nothing else."""

    def __init__(self, path, link, multiclass, what="predictions"):
        self.path = path
        self.link = link
        self.multiclass = multiclass
        self.what = what
        self.fd = None
        self.stdout = path == "-"
        self.regular = False
        self.offset = 0
        self.broken = False
        self.count = 0

    def open(self):
        """Kept for callers of the old API: the file is opened at the first prediction."""

    def _open(self):
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as e:
            raise OutputError(f"{self.path}: cannot write {self.what}: {e.strerror or e}") from None
        try:
            self.regular = stat.S_ISREG(os.fstat(self.fd).st_mode)
        except OSError:
            self.regular = False

    def _lines(self, batch, pred, probs):
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
        return vals

    def __call__(self, batch, pred, probs=None):
        if self.broken or batch.n == 0:
            return
        vals = self._lines(batch, pred, probs)
        text = "\n".join(vals) + "\n"
        if self.stdout:
            try:
                sys.stdout.write(text)
            except BrokenPipeError:
                self._pipe_closed()
                return
            self.count += len(vals)
            return
        if self.fd is None:
            self._open()
        data = text.encode("utf-8", "surrogateescape")
        mv, done = memoryview(data), 0
        try:
            while done < len(data):
                done += os.write(self.fd, mv[done:])
        except BrokenPipeError:
            self._pipe_closed()
            return
        except OSError as e:
            if done and self.regular:
                try:  # no partial last line: back to the end of the last complete batch
                    os.ftruncate(self.fd, self.offset)
                except OSError:
                    pass
            raise OutputError(f"{self.path}: cannot write {self.what}: {e.strerror or e}; "
                              f"{self._kept()}") from None
        self.offset += len(data)
        self.count += len(vals)

    def _kept(self):
        return (f"the {self.count} lines written before are kept (complete lines)" if self.count
                else "nothing was written")

    def _pipe_closed(self):
        """The reader went away: stop printing (the run and its other outputs go on)."""
        self.broken = True
        if self.stdout:
            silence_stdout()
        elif self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

    def close(self, failed=False):
        """Flush and close. A successful run that predicted nothing still leaves an (empty)
        file, as VW; a failed one that predicted nothing leaves nothing (an existing file
        unchanged). Predictions already written are always kept."""
        if self.stdout:
            if not self.broken:
                try:
                    sys.stdout.flush()
                except BrokenPipeError:
                    self._pipe_closed()
                except OSError as e:
                    if not failed:
                        raise OutputError(f"standard output: cannot write {self.what}: {e.strerror or e}") from None
            return
        if self.fd is None and not failed and not self.broken:
            self._open()
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError as e:
                if not failed:
                    raise OutputError(f"{self.path}: cannot write {self.what}: {e.strerror or e}") from None


def json_safe(x):
    """``x`` with every float that is not finite (a loss that overflowed) replaced by ``None``:
    JSON has no NaN or Infinity, and ``json.dumps`` would write them anyway."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, np.floating):
        return json_safe(float(x))
    return x


def metrics_text(summary: dict) -> str:
    """The run's summary as strict JSON (sorted keys; a non-finite number is ``null``)."""
    return json.dumps(json_safe(summary), indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_metrics(summary: dict, path: str) -> None:
    """The run's summary as JSON (:func:`metrics_text`) to ``path``, written atomically;
    ``-``: stdout."""
    plan = OutputPlan([("--metrics", path, "metrics")])
    plan.stage("--metrics", lambda f: f.write(metrics_text(summary).encode()))
    plan.commit()


