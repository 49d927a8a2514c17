"""``-P/--progress``: how a run shows its progress on stderr, and the progress bar.

``auto`` (the default) shows a bar when stderr is a terminal and the inputs' size is known
(files: their bytes, compressed for gzip; Parquet: rows from the footer's metadata; stdin only
when it is a regular file), and VW's progress table otherwise; ``bar`` always shows a bar (no
ETA when the size is unknown); ``table`` VW's table; ``off`` neither (the settings and the
summary are still printed; ``--quiet`` prints nothing). A number keeps VW's meaning, where the
table's rows (and ``--history_file``'s) fall; ``-P bar -P 1000`` gives both.

The bar is tqdm's (https://tqdm.github.io): position in the input with its ETA, examples,
examples/s and the running progressive loss, redrawn at most every :data:`REFRESH_SECONDS`.
:class:`BarMonitor` is the ``monitor`` of :func:`streamlearn.api.train`; between redraws an
update costs one clock read, so the bar costs nothing measurable against learning
(``benchmarks/progress_overhead.py``). Lines logged while the bar is up (warnings) are
printed above it. Without tqdm installed, ``auto`` and ``bar`` fall back to the table.
"""
from __future__ import annotations

import sys
import time

__all__ = ["MODES", "BarMonitor", "progress_display", "REFRESH_SECONDS"]

MODES = ("auto", "bar", "table", "off")
#: the bar is redrawn at most this often (tqdm's ``mininterval`` too)
REFRESH_SECONDS = 0.1


def _split(values) -> tuple:
    """``(mode, interval)`` of the ``-P`` values given (each a mode or a number; the last of
    each kind wins)."""
    mode, interval = "auto", "2.0"
    for v in values or ():
        if str(v).lower() in MODES:
            mode = str(v).lower()
        else:
            interval = str(v)
    return mode, interval


def _is_terminal(f) -> bool:
    try:
        return f.isatty()
    except (AttributeError, ValueError):
        return False


def progress_display(values, quiet: bool, stream=None):
    """``(interval, table, monitor)`` for a run given ``-P values``: the ``-P`` interval, whether
    VW's table is printed, and the :class:`BarMonitor` (or None)."""
    mode, interval = _split(values)
    stream = sys.stderr if stream is None else stream
    if quiet or mode == "off":
        return interval, False, None
    if mode == "table" or (mode == "auto" and not _is_terminal(stream)):
        return interval, True, None
    return interval, True, BarMonitor(force=(mode == "bar"), stream=stream)


def _si(x: float) -> str:
    for unit, d in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= d:
            return f"{x / d:.1f}{unit}"
    return f"{x:.0f}"


class BarMonitor:
    """A tqdm progress bar as the run's monitor (:func:`streamlearn.api.train`). With ``force``
    False, :meth:`start` declines (the table is shown instead) when the size is unknown."""

    def __init__(self, force: bool = False, stream=None, refresh: float = REFRESH_SECONDS):
        self.force = force
        self.stream = sys.stderr if stream is None else stream
        self.refresh = refresh
        self.bar = None
        self.total = None
        self._last = 0.0
        self._t0 = None
        self._pos = None
        self._ev = None
        self._pending = []

    # the log callback of the run: above the bar while it is up
    def log(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            self.stream.write(line + "\n")

    def start(self, total, unit) -> bool:
        if total is None and not self.force:
            return False
        try:
            from tqdm import tqdm
        except ImportError:  # an install without tqdm: VW's table
            if self.force:
                self.log("streamlearn: --progress bar needs tqdm (pip install tqdm); showing the table")
            return False
        self.total = total or None
        if self.total is None:  # no size: count examples, no ETA
            fmt = "{n_fmt} examples [{elapsed}, {rate_fmt}]{postfix}"
            kw = {"unit": " ex", "unit_scale": True}
        else:
            shown = "B" if unit == "bytes" else " rows"
            fmt = "{percentage:3.0f}%|{bar}| {n_fmt}" + shown + "/{total_fmt}" + shown + " [{elapsed}<{remaining}]{postfix}"
            kw = {"unit": shown.strip(), "unit_scale": True, "unit_divisor": 1024 if unit == "bytes" else 1000}
        self.bar = tqdm(total=self.total, file=self.stream, mininterval=self.refresh, bar_format=fmt,
                        dynamic_ncols=True, leave=True, smoothing=0.1, **kw)
        self._t0 = time.perf_counter()
        return True

    def _postfix(self, ev) -> str:
        secs = max(time.perf_counter() - self._t0, 1e-9)
        parts = [] if self.total is None else [f"{ev.examples:,} ex"]
        if self.total is not None:
            parts.append(f"{_si(ev.examples / secs)} ex/s")
        if ev.weighted_labeled > 0:
            parts.append(f"loss {ev.loss_sum / ev.weighted_labeled:.4f}")
        return ", ".join(parts)  # tqdm puts ", " before it

    def _draw(self):
        ev, pos = self._ev, self._pos
        target = ev.examples if self.total is None else (self.bar.n if pos is None else min(pos, self.total))
        self.bar.set_postfix_str(self._postfix(ev), refresh=False)
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)  # tqdm's smoothed rate and ETA; it redraws
        else:
            self.bar.refresh()

    def update(self, ev, position) -> None:
        """After each batch: redrawn when :data:`REFRESH_SECONDS` have passed since the last."""
        self._ev = ev
        if position is not None:
            self._pos = position
        now = time.perf_counter()
        if now - self._last >= self.refresh:
            self._last = now
            self._draw()

    def close(self, failed: bool = False) -> None:
        if self.bar is None:
            return
        if self._ev is not None:
            if not failed and self.total is not None and self._pos is not None:
                self._pos = self.total  # the whole input was read
            self._draw()
        self.bar.close()
        self.bar = None
