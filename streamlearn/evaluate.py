"""Progressive validation over a stream of batches.

The learner's kernel does the per-example work (predict, record, then learn); this module
aggregates what it records, vectorised per batch: running sums, VW's progress rows at
doubling (or fixed) intervals, predictions for the sink, and the final summary.
"""
from __future__ import annotations

import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .algos.losses import best_constant
from .signals import GUARDED_SIGNALS, block_in_this_thread

__all__ = ["ProgressSchedule", "Evaluation", "run_stream", "binary_outputs", "InterruptGuard", "Interrupted",
           "SliceTimer", "raise_interrupted", "GUARDED_SIGNALS"]


@dataclass
class ProgressSchedule:
    """VW's ``-P``: a float is multiplicative (default 2.0), an integer additive, both over the
    cumulative example weight, as VW's ``shared_data::update_dump_interval``: a row is printed
    at the first example whose cumulative weight reaches ``next_at`` (initially 1, or N for
    ``-P N``), and the next is due at that weight times 2.0 (or plus N). With unit weights the
    rows fall at examples 1, 2, 4, ... (every N)."""

    spec: str = "2.0"
    next_at: float = 1.0

    def __post_init__(self):
        s = str(self.spec)
        self.multiplicative = "." in s or "e" in s.lower()
        try:
            self.step = float(s)
        except ValueError:
            raise ValueError(f"-P/--progress must be a number (2.0: rows at 1, 2, 4, ...; 100: every "
                             f"100 examples) or auto, bar, table or off, got {s!r}") from None
        if not math.isfinite(self.step):
            raise ValueError(f"-P/--progress must be a finite number, got {s}")
        if self.step <= (1.0 if self.multiplicative else 0.0):
            raise ValueError(f"-P/--progress must be > {'1.0' if self.multiplicative else '0'}, got {s}")
        self.next_at = 1.0 if self.multiplicative else self.step

    def advance(self, weight: float):
        """The next row's cumulative weight after a row at ``weight`` (VW keeps it as a float32)."""
        w, step = np.float32(weight), np.float32(self.step)
        self.next_at = float(w * step if self.multiplicative else w + step)


@dataclass
class Evaluation:
    """Running sums of a progressive-validation (or test-only) run.

    Multiclass runs are reported as VW reports ``--oaa``: the average loss (table and summary)
    is the weighted 0/1 loss, the weighted label sum is 0, there is no best constant, and with
    ``log_loss`` the learner's per-example losses (its cross-entropy) are summed apart, as VW's
    ``average multiclass log loss``."""

    loss_name: str
    classification: bool
    multiclass: bool = False
    log_loss: bool = False
    examples: int = 0
    labeled: int = 0
    weighted_examples: float = 0.0
    weighted_labeled: float = 0.0
    weighted_label_sum: float = 0.0
    weighted_label_sq_sum: float = 0.0
    weighted_pos: float = 0.0
    loss_sum: float = 0.0
    err_sum: float = 0.0
    binary_labels: bool = True
    label_lo: float = float("inf")
    err_sum_half: float = 0.0
    log_loss_sum: float = 0.0
    total_features: int = 0
    skipped_lines: int = 0
    last_row_loss: float = 0.0
    last_row_weight: float = 0.0
    t0: float = field(default_factory=time.perf_counter)

    def add(self, batch, pred, loss, schedule: ProgressSchedule | None, emit_row=None, probs=None):
        """Fold one batch of recorded predictions and losses into the sums. With ``probs``
        (``--probabilities``: ``(n, K)``) a progress row shows the predicted class as VW does,
        ``3(44%)``: the class and its probability."""
        n = batch.n
        if n == 0:
            return
        labeled = ~np.isnan(batch.labels)
        prev = (self.binary_labels, self.label_lo, self.err_sum_half)  # before this batch (rows' error rates)
        w = np.where(labeled, batch.weights, 0.0)
        lab = np.where(labeled, batch.labels, 0.0)
        wl = np.where(labeled, loss, 0.0) * w
        nfeat = np.diff(batch.offsets)
        if self.multiclass:
            err = (pred != lab).astype(np.float64) * w
            target = np.zeros(n)  # VW: weighted label sum 0 for multiclass labels
            if self.log_loss:
                self.log_loss_sum += float(wl.sum())
            wl = err  # VW's --oaa average loss: the 0/1 loss
        else:
            if self.classification:
                target = np.where(lab > 0, 1.0, -1.0)
            else:
                target = lab
                if self.binary_labels and np.any(labeled & (lab != 1.0) & (lab != -1.0) & (lab != 0.0)):
                    self.binary_labels = False
            if self.classification:
                err = ((lab > 0) != (pred > 0)).astype(np.float64) * w
            else:
                # squared loss on binary labels: the threshold is 0 for {-1,+1} labels and 0.5
                # for {0,1} labels; which one applies is known only at the end, so count both
                if labeled.any():
                    self.label_lo = min(self.label_lo, float(lab[labeled].min()))
                self.err_sum_half += float((((lab > 0.5) != (pred > 0.5)) * w).sum())
                err = ((lab > 0) != (pred > 0)).astype(np.float64) * w
        if schedule is not None and emit_row is not None and (
                schedule.next_at <= (self.weighted_examples + float(batch.weights.sum())) * (1 + 1e-12)):
            self._rows(batch, pred, w, wl, err, lab, labeled, nfeat, schedule, emit_row, probs, prev)
        self.examples += n
        self.labeled += int(labeled.sum())
        self.weighted_examples += float(batch.weights.sum())
        self.weighted_labeled += float(w.sum())
        # labels past ~1e154 (finite, so not malformed) square past the double range: the sum
        # of squares is then inf, truly (and so is the best constant's loss, left out below)
        with np.errstate(over="ignore", invalid="ignore"):
            self.weighted_label_sum += float((w * target).sum())
            self.weighted_label_sq_sum += float((w * target * target).sum())
        self.weighted_pos += float(w[target > 0].sum())
        self.loss_sum += float(wl.sum())
        self.err_sum += float(err.sum())
        self.total_features += int(batch.nnz)

    def _rows(self, batch, pred, w, wl, err, lab, labeled, nfeat, schedule, emit_row, probs, prev):
        """VW's progress rows falling in this batch (:class:`ProgressSchedule`): the average loss,
        the loss since the last row, the example counter, the cumulative example weight (VW's
        ``weighted_examples()``: labeled and unlabeled), the example's label, prediction and
        feature count; and, as keywords, the error rate so far and the seconds since the start."""
        tot_all = self.weighted_examples + np.cumsum(batch.weights)  # VW: every example's weight
        cw = np.cumsum(w)
        cl = np.cumsum(wl)
        ce = np.cumsum(err)
        half = None
        if not (self.multiclass or self.classification):
            # squared loss: the error rate's threshold follows the labels seen so far (0.5 for
            # {0,1} labels, else 0), and there is none once a label is not -1, 0 or +1 (summary)
            half = np.cumsum(((lab > 0.5) != (pred > 0.5)) * w)
            lo = np.minimum(prev[1], np.minimum.accumulate(np.where(labeled, lab, np.inf)))
            nonbinary = np.cumsum(labeled & (lab != 1.0) & (lab != -1.0) & (lab != 0.0))
        while schedule.next_at <= tot_all[-1]:
            i = int(np.searchsorted(tot_all, schedule.next_at, side="left"))
            tot_w = self.weighted_labeled + cw[i]
            tot_l = self.loss_sum + cl[i]
            avg = tot_l / tot_w if tot_w > 0 else float("nan")
            dw = tot_w - self.last_row_weight
            since = (tot_l - self.last_row_loss) / dw if dw > 0 else float("nan")
            self.last_row_loss, self.last_row_weight = tot_l, tot_w
            error = None
            if tot_w > 0:
                if half is None:
                    error = (self.err_sum + ce[i]) / tot_w
                elif prev[0] and nonbinary[i] == 0:
                    errs = prev[2] + half[i] if lo[i] >= 0 else self.err_sum + ce[i]
                    error = errs / tot_w
            shown = float(pred[i])
            if probs is not None and not math.isnan(shown):
                shown = f"{int(shown)}({100 * probs[i, int(shown) - 1]:.0f}%)"
            emit_row(avg, since, self.examples + i + 1, float(tot_all[i]), float(batch.labels[i]), shown,
                     int(nfeat[i]), error=error, seconds=time.perf_counter() - self.t0)
            schedule.advance(float(tot_all[i]))

    def summary(self, loss) -> dict:
        secs = time.perf_counter() - self.t0
        avg = self.loss_sum / self.weighted_labeled if self.weighted_labeled > 0 else None
        s = {
            "examples": self.examples,
            "labeled_examples": self.labeled,
            "weighted_examples": self.weighted_examples,
            "weighted_label_sum": self.weighted_label_sum,
            "loss_function": self.loss_name,
            "average_loss": avg,
            "multiclass_log_loss": (self.log_loss_sum / self.weighted_labeled
                                    if self.multiclass and self.log_loss and self.weighted_labeled > 0 else None),
            "error_rate": None,
            "best_constant": None,
            "best_constant_loss": None,
            "total_features": self.total_features,
            "skipped_lines": self.skipped_lines,
            "seconds": secs,
            "examples_per_second": self.examples / secs if secs > 0 else 0.0,
        }
        if self.weighted_labeled > 0:
            if self.multiclass or self.classification or self.binary_labels:
                errs = self.err_sum
                if not (self.multiclass or self.classification) and self.label_lo >= 0:
                    errs = self.err_sum_half  # {0,1} labels
                s["error_rate"] = errs / self.weighted_labeled
            if not self.multiclass:
                with np.errstate(over="ignore", invalid="ignore"):
                    c, cl = best_constant(loss, self.weighted_labeled, self.weighted_label_sum,
                                          self.weighted_pos, self.weighted_label_sq_sum)
                if c is not None and math.isfinite(c) and math.isfinite(cl):  # else: beyond doubles
                    s["best_constant"], s["best_constant_loss"] = float(c), float(cl)
        return s


#: the exploding-loss warning: the progressive loss so far above this many times that of predicting
#: 0 (log K for multiclass; at least 1), after at least EXPLODED_AFTER labeled examples
EXPLODED_FACTOR = 100.0
EXPLODED_AFTER = 50


class _LossWatch:
    """Watches the progressive loss for a blow-up (a learner taking steps far too large for the
    feature values, e.g. unscaled counts or pixels): the weighted loss of the labeled examples
    so far against the loss of the zero predictor on the same examples (``log K`` for
    multiclass). ``check`` returns ``(examples, average loss, threshold)`` once, the first time
    the average passes ``EXPLODED_FACTOR`` times the reference (at least 1), else None."""

    def __init__(self, learner):
        self.learner = learner
        self.w = self.loss = self.ref = 0.0
        self.n = 0
        self.fired = False

    def check(self, batch, loss):
        if self.fired:
            return None
        lab = ~np.isnan(batch.labels)
        if not lab.any():
            return None
        w = batch.weights[lab]
        L = self.learner
        if L.multiclass:
            ref = np.full(w.shape, math.log(max(2, int(getattr(L, "n_classes", 2) or 2))))
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                ref = L.loss.value(np.zeros(w.shape), batch.labels[lab])
        with np.errstate(over="ignore", invalid="ignore"):
            self.loss += float((w * loss[lab]).sum())
            self.ref += float((w * ref).sum())
        self.w += float(w.sum())
        self.n += int(lab.sum())
        if self.n < EXPLODED_AFTER or self.w <= 0:
            return None
        avg = self.loss / self.w
        limit = EXPLODED_FACTOR * max(self.ref / self.w, 1.0)
        if not avg > limit:  # (NaN: the degenerated-state error, not this)
            return None
        self.fired = True
        return self.n, avg, limit


def _degenerated(learner, batch, pred):
    from .errors import NumericError
    i = int(np.flatnonzero(np.isnan(pred))[0])
    where = f"{batch.source or '<input>'}:{int(batch.lines[i])}"
    raise NumericError(f"{where}: the {learner.name} learner's state became NaN/inf at this example; "
                       "stopped, no model written (try a smaller learning rate or scaled feature values)")


def _divided_by_zero(learner, batch, exc):
    from .errors import NumericError
    src = batch.source or "<input>"
    lo, hi = int(batch.lines[0]), int(batch.lines[batch.n - 1])
    where = f"{src}:{lo}" if lo == hi else f"{src}:{lo}-{hi}"
    raise NumericError(f"{where}: the {learner.name} learner divided by zero ({exc}) within these examples; "
                       "stopped, no model written (try a smaller learning rate or scaled feature values)") from None


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived; ``signum`` says which. Raised between slices of a
    batch, so the learner's state is that of a whole number of examples."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum




def _default_handler(sig):
    return signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL


def raise_interrupted(signum, frame):
    """A signal handler raising :class:`Interrupted`: what a program that owns its process (the
    CLI) installs for SIGINT/SIGTERM/SIGHUP around a run, so that a signal before or after the
    guarded loop (loading a model, compiling, writing the outputs) is a clean exit 128 + signal
    too. :class:`InterruptGuard` takes it for a default handler."""
    raise Interrupted(signum)


def _replaceable(sig) -> bool:
    h = signal.getsignal(sig)
    return h is _default_handler(sig) or h is raise_interrupted


class InterruptGuard:
    """Defers SIGINT/SIGTERM/SIGHUP while a slice of a batch is being learned and recorded
    (``busy``), so an interrupt never leaves the learner half-updated; outside that window
    (waiting for input) the signal raises at once. :func:`run_stream` bounds the work between
    two checks (:class:`SliceTimer`), so a slow learner answers within about
    :data:`SLICE_SECONDS`. A second signal while the first waits ends the process at once
    (exit 128 + signal; a kernel can run for seconds before Python sees the first): a watcher
    thread reads the signal numbers CPython writes to its wakeup fd the moment they arrive,
    whatever the main thread is doing. Installed only on the main thread and only over the
    default handlers or :func:`raise_interrupted` (an embedding program's own handlers, and its
    wakeup fd, are left alone)."""

    def __init__(self):
        self.busy = False
        self.pending = None
        self._old = {}
        self._wakeup = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in GUARDED_SIGNALS:
                if _replaceable(sig):
                    self._old[sig] = signal.getsignal(sig)
                    signal.signal(sig, self._handler)
            if self._old:
                self._start_watcher()
        return self

    def _start_watcher(self):
        try:
            r, w = os.pipe()
        except OSError:
            return
        os.set_blocking(w, False)
        try:
            old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(r)
            os.close(w)
            return
        if old != -1:  # someone else's (an event loop): give it back, no watcher
            signal.set_wakeup_fd(old)
            os.close(r)
            os.close(w)
            return
        guarded = {int(s) for s in self._old}

        def watch():
            block_in_this_thread()  # the signals land on the main thread (streamlearn.signals)
            seen = 0
            while True:
                try:
                    data = os.read(r, 64)
                except OSError:
                    data = b""
                if not data:
                    break
                for b in data:
                    if b in guarded:
                        seen += 1
                        if seen >= 2:
                            try:
                                os.write(2, b"streamlearn: interrupted again: stopped at once\n")
                            finally:
                                os._exit(128 + b)
            os.close(r)

        t = threading.Thread(target=watch, name="streamlearn-signals", daemon=True)
        t.start()
        self._wakeup = w

    def _handler(self, signum, frame):
        if self.busy:
            self.pending = Interrupted(signum)
        else:
            raise Interrupted(signum)

    def check(self):
        self.busy = False
        if self.pending is not None:
            e, self.pending = self.pending, None
            raise e

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
        if self._wakeup is not None:
            signal.set_wakeup_fd(-1)
            os.close(self._wakeup)  # the watcher reads end of file and stops
            self._wakeup = None
        return False


#: the work between two interrupt checks, in seconds (about): a batch of a slow learner is
#: learned in slices of this much work
SLICE_SECONDS = 0.25


class SliceTimer:
    """How many examples of a batch to learn before the next interrupt check, so that a slice
    costs about :data:`SLICE_SECONDS` whatever the learner: examples x the cost per example
    measured on the latest slice (the first slice of a run is one example). A fast learner gets
    whole batches (one kernel call); Oja-SON with a large sketch a few examples per slice. Results do not depend on it: every learner
    predicts then learns example by example, whatever the batch (``tests/test_contract.py``)."""

    def __init__(self, seconds=SLICE_SECONDS):
        self.seconds = seconds
        self.per_example = None  # seconds per example, of the latest slice
        self.clock = time.perf_counter

    def size(self, n: int) -> int:
        """Examples to learn next, of ``n`` left in the batch."""
        if self.per_example is None:
            return min(n, 1)
        if self.per_example <= 0:
            return n
        return int(min(n, max(1, self.seconds / self.per_example)))

    def record(self, n: int, seconds: float) -> None:
        if n <= 0:
            return
        self.per_example = seconds / n  # the latest slice: a first call's compile time is forgotten at once


def _split_bad_labels(learner, batch, strict):
    """``(parts, errors, fatal)``: the runs of ``batch`` between rows whose label the learner
    cannot use (e.g. label 3 under ``--oaa 2``), and those rows as ``(source, line, reason)``.
    With ``strict``, ``parts`` stops at the first such row and ``fatal`` is the
    :class:`InputError` to raise once the rows before it are done (their predictions kept)."""
    bad = learner.bad_labels(batch.labels)
    if bad is None or not bad.any():
        return [batch], [], None
    rows = np.flatnonzero(bad)
    src = batch.source or "<input>"
    errs = [(src, int(batch.lines[i]), learner.label_problem(batch.labels[i])) for i in rows]
    if strict:
        from .errors import InputError
        first = int(rows[0])
        return [batch.slice(0, first)] if first else [], [], InputError(f"{errs[0][0]}:{errs[0][1]}: {errs[0][2]}")
    parts, a = [], 0
    for i in rows:
        if i > a:
            parts.append(batch.slice(a, int(i)))
        a = int(i) + 1
    if a < batch.n:
        parts.append(batch.slice(a, batch.n))
    return parts, errs, None


#: a run whose first this many lines are all malformed (or unusable) stops: wrong input
BAD_HEAD_LINES = 100

_FORMAT_NAMES = {"vw": "VW text", "libsvm": "LIBSVM"}
_FORMAT_HINTS = {"vw": "is it LIBSVM? try --format libsvm", "libsvm": "is it VW text? try --format vw",
                 "binary": "it looks like binary data, not text"}


class _BadHead:
    """The malformed lines (or examples with unusable labels) seen before the first example:
    a run made only of them is reading input that is not what it claims to be."""

    def __init__(self):
        self.count = 0
        self.first = None
        self.fmt = None
        self.labels = False

    def add(self, errs, fmt, labels):
        if self.first is None:
            self.first, self.fmt, self.labels = errs[0], fmt, labels
        self.count += len(errs)

    def error(self, learner, whole, total=0, labeled=False):
        """The :class:`InputError`: after the first lines (``whole`` False), or at the end of a
        stream that gave no (``labeled``) example and ``total`` skipped lines."""
        from .errors import InputError

        src, line, reason = self.first
        if whole:
            what = f"{total} lines skipped and no {'labeled ' if labeled else ''}example read"
        else:
            what = f"the first {self.count} lines skipped"
        if self.labels:
            return InputError(f"{src}: {what}: the labels are not ones --algo {learner.name} can learn "
                              f"from (line {line}: {reason})")
        as_ = f" as {_FORMAT_NAMES[self.fmt]}" if self.fmt in _FORMAT_NAMES else ""
        hint = _FORMAT_HINTS.get(self.fmt, "is it the input you meant?")
        return InputError(f"{src}: {what}: they failed to parse{as_} (line {line}: {reason}); {hint} "
                          "(streamlearn reads VW text, LIBSVM and Parquet)")


def binary_outputs(batch, pred, loss):
    """VW's ``--binary``: predictions become -1/+1 (the sign of the score, -1 at 0) and the loss
    of an example labeled -1 or +1 becomes 0/1 (other labels keep the learner's loss, as VW's
    binary reduction does)."""
    sign = np.where(pred > 0, 1.0, -1.0)
    lab = batch.labels
    pm1 = np.abs(lab) == 1.0
    return sign, np.where(pm1, (lab != sign).astype(np.float64), loss)


def run_stream(learner, batches, *, learn=True, schedule=None, emit_row=None, on_predictions=None,
               on_errors=None, evaluation=None, guard=None, strict=False, binary=False, on_raw=None,
               log_loss=None, on_batch=None, on_exploded=None, finish=True):
    """Run the learner over ``batches``; returns the :class:`Evaluation`. Learning, the stream's end learns the
    learner's buffered partial minibatch (``finish()``) unless ``finish`` is false (a stream that another one
    continues: the engine's chain of partitions).

    ``on_predictions(batch, pred)`` receives every batch's recorded predictions (for ``-p``; with
    ``binary``, VW's -1/+1 and 0/1 loss: :func:`binary_outputs`), ``on_raw(batch, raw)`` the
    scores before clipping and ``binary`` (the learner's ``last_raw``, else the predictions; ``-r``);
    ``on_errors(list)`` the malformed lines a reader skipped in each batch, and the examples
    whose label the learner cannot use (skipped the same way; ``strict``: an InputError);
    ``on_batch(evaluation, batch)`` is called after each batch of ``batches`` is folded in (a
    progress display; the reader's ``batch.extra`` is the batch's). ``on_exploded(examples,
    average loss, threshold)`` is called once (learning only) when the progressive loss blows up
    (:class:`_LossWatch`: for a warning suggesting ``--unit_norm``). With
    ``guard`` (an entered :class:`InterruptGuard`), interrupts are taken only between batches.
    Input that is not what it claims to be is an :class:`~streamlearn.errors.InputError` (exit 1):
    when the first ``BAD_HEAD_LINES`` lines, or all lines of a non-empty stream, are malformed
    or have labels the learner cannot use.
    """
    guard = guard or InterruptGuard()
    if log_loss is None:  # a softmax learner's loss is its cross-entropy
        log_loss = bool(learner.multiclass and learner.native_multiclass)
    ev = evaluation or Evaluation(learner.loss_name, learner.loss.classification, learner.multiclass, log_loss)
    head = _BadHead()
    timer = SliceTimer()
    watch = _LossWatch(learner) if (learn and on_exploded is not None) else None

    def skipped(errs, fmt, labels):
        ev.skipped_lines += len(errs)
        if on_errors is not None:
            on_errors(errs)
        if ev.examples == 0:  # nothing learnable before these: they may be all there is
            head.add(errs, fmt, labels)

    for batch in batches:
        guard.busy = True
        errs = batch.extra.get("errors") if batch.extra else None
        if errs:
            skipped(errs, batch.extra.get("format"), labels=False)
        if batch.n:
            parts, errs, fatal = _split_bad_labels(learner, batch, strict)
            for whole in parts:
                if whole.n == 0:
                    continue
                # slices of bounded work, an interrupt check after each; the sums and progress
                # rows are taken over the whole part, so the figures never depend on the slicing
                a, preds, losses, probs = 0, [], [], []
                while a < whole.n:
                    k = timer.size(whole.n - a)
                    part = whole if k == whole.n else whole.slice(a, a + k)
                    a += k
                    t0 = timer.clock()
                    try:
                        pred, loss = learner.learn_batch(part) if learn else learner.predict_batch(part)
                    except (ZeroDivisionError, FloatingPointError) as e:  # a compiled kernel's x / 0
                        _divided_by_zero(learner, part, e)
                    timer.record(k, timer.clock() - t0)
                    if np.isnan(pred).any():
                        _degenerated(learner, part, pred)
                    if on_raw is not None:
                        raw = getattr(learner, "last_raw", None)
                        on_raw(part, pred if raw is None else raw)
                    if binary:
                        pred, loss = binary_outputs(part, pred, loss)
                    if on_predictions is not None:
                        on_predictions(part, pred)
                    preds.append(pred)
                    losses.append(loss)
                    probs.append(getattr(learner, "last_probabilities", None))
                    if a < whole.n:
                        guard.check()
                        guard.busy = True
                if len(preds) > 1:
                    pred, loss = np.concatenate(preds), np.concatenate(losses)
                    probs = [None if probs[0] is None else np.concatenate(probs)]
                ev.add(whole, pred, loss, schedule, emit_row, probs[0])
                if watch is not None:
                    hit = watch.check(whole, loss)
                    if hit is not None:
                        on_exploded(*hit)
            if fatal is not None:
                raise fatal
            if errs:
                skipped(errs, None, labels=True)
        if ev.examples == 0 and head.count >= BAD_HEAD_LINES:
            raise head.error(learner, whole=False)
        if on_batch is not None:
            on_batch(ev, batch)
        guard.check()
    if head.count and (ev.labeled if learn else ev.examples) == 0:
        raise head.error(learner, whole=True, total=ev.skipped_lines, labeled=learn)
    if learn and finish:
        guard.busy = True
        learner.finish()
        guard.check()
    return ev
