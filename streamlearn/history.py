"""``--history_file FILE``: a run's learning curve as JSON lines, for ``streamlearn plot``.

The first line is a header naming the run: ``{"streamlearn_history": 1, "label": ...,
"algo": ..., "options": {...}, ...}`` (``options``: the learner and reader options given,
``hyper``: every hyper-parameter the learner ran with). Then one line per row of VW's progress
table (:class:`~streamlearn.evaluate.ProgressSchedule`, ``-P``: at cumulative weight 1, 2, 4,
... by default), whether or not the table is shown, and a last one with ``"final": true``
for the whole run, equal to the summary::

    {"examples": 4, "weighted_examples": 4.0, "average_loss": 0.62, "since_last": 0.55,
     "error": 0.25, "seconds": 0.004}

(``error``: the error rate so far, as the summary's; null where the summary has none.) Rows
are kept in an anonymous temporary file while the run goes on (memory stays bounded whatever
``-P``), and the file is written atomically with the run's other outputs at its end.
"""
from __future__ import annotations

import json
import math
import tempfile

__all__ = ["HistoryRecorder", "HEADER_KEY", "read_history", "run_label"]

HEADER_KEY = "streamlearn_history"
_ROW_KEYS = ("examples", "weighted_examples", "average_loss", "since_last", "error", "seconds")


def run_label(algo: str, options: dict) -> str:
    """A short name for a run: the learner and the options given, ``oja-son sketch_size=10``."""
    parts = [algo]
    for k, v in options.items():
        if v is None or v is False or v == () or v == []:
            continue
        if v is True:
            parts.append(k)
        elif isinstance(v, (list, tuple)):
            parts.append(f"{k}={','.join(map(str, v))}")
        else:
            parts.append(f"{k}={v}")
    return " ".join(parts)


def _json_safe(x):
    """``x`` with every non-finite float (a loss that overflowed) as None: JSON has no NaN."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _dumps(obj) -> bytes:
    return (json.dumps(_json_safe(obj), allow_nan=False, separators=(", ", ": "),
                        default=lambda o: o.item() if hasattr(o, "item") else str(o)) + "\n").encode()


class HistoryRecorder:
    """Collects the rows of one run (``header``: its header fields) and writes the file."""

    def __init__(self, header: dict):
        self.header = {HEADER_KEY: 1, **header}
        self._spool = tempfile.TemporaryFile()
        self.rows = 0

    def row(self, avg, since, count, weight, *_, error=None, seconds=None, **__):
        """One progress row (the table's arguments, :meth:`Evaluation.add` ``emit_row``)."""
        self._spool.write(_dumps(dict(zip(_ROW_KEYS, (int(count), weight, avg, since, error, seconds)))))
        self.rows += 1

    def write_to(self, f, summary: dict) -> None:
        """The header, the rows, then the final row from the run's ``summary``."""
        f.write(_dumps(self.header))
        self._spool.seek(0)
        while True:
            data = self._spool.read(1 << 20)
            if not data:
                break
            f.write(data)
        last = {"examples": summary["examples"], "weighted_examples": summary["weighted_examples"],
                "average_loss": summary.get("average_loss"), "since_last": None,
                "error": summary.get("error_rate"), "seconds": summary.get("seconds"), "final": True}
        f.write(_dumps(last))

    def close(self):
        self._spool.close()


def read_history(path: str):
    """``(header, rows)`` of a ``--history_file`` file; raises ``ValueError`` naming the file and line
    for anything else."""
    header, rows = None, []
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                raise ValueError(f"{path}:{n}: not a JSON line (is it a --history_file file?)") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object")
            if header is None:
                if HEADER_KEY not in obj:
                    raise ValueError(f"{path}:{n}: no streamlearn --history_file header (written by "
                                     "'streamlearn train --history_file FILE')")
                header = obj
                continue
            if not isinstance(obj.get("examples"), int):
                raise ValueError(f"{path}:{n}: a row without an integer 'examples'")
            rows.append(obj)
    if header is None:
        raise ValueError(f"{path}: empty (no --history_file header)")
    return header, rows
