"""``streamlearn plot``: learning curves of ``--history_file`` runs in one figure.

One line per run (its label: the learner and the options it was given, from the file's
header; :mod:`streamlearn.history`), the progressive loss (or ``since_last``, or the error rate)
against the examples seen on a log-scaled axis, as VW's doubling table reads. matplotlib is an
optional dependency (``pip install 'streamlearn[plot]'``); it is imported only here, with the
non-interactive Agg backend, so plotting works without a display.
"""
from __future__ import annotations

import os

from .errors import ConfigError, InputError
from .history import read_history

__all__ = ["plot_histories", "METRICS", "MissingExtra"]

#: the y axes ``plot`` can draw: history field -> axis label
METRICS = {"average_loss": "progressive average loss", "since_last": "loss since the previous row",
           "error": "progressive error rate"}


class MissingExtra(ConfigError):
    """matplotlib is not installed (the ``plot`` extra)."""


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise MissingExtra("streamlearn plot needs matplotlib, which is not installed: "
                           "pip install 'streamlearn[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_histories(paths, out, metric: str = "average_loss", title: str | None = None,
                   labels=None) -> int:
    """Draw the runs ``paths`` (``--history_file`` files) into ``out`` (the format from its
    extension: .png, .svg, .pdf), written atomically. ``labels`` (optional) replace the headers'
    labels, in order. Returns the number of lines drawn."""
    from .io.writing import OutputPlan

    if metric not in METRICS:
        raise ConfigError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    if not paths:
        raise ConfigError("plot needs at least one --history_file file")
    runs = []
    for p in paths:
        try:
            header, rows = read_history(p)
        except OSError as e:
            raise InputError(f"{p}: cannot read: {e.strerror or e}") from None
        except ValueError as e:
            raise InputError(str(e)) from None
        runs.append((p, header, rows))
    ext = os.path.splitext(out)[1].lower().lstrip(".") or "png"
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    drawn = 0
    for k, (p, header, rows) in enumerate(runs):
        pts = [(r["examples"], r.get(metric)) for r in rows if r.get(metric) is not None and r["examples"] > 0]
        label = labels[k] if labels and k < len(labels) else header.get("label") or os.path.basename(p)
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.5, label=label)
        drawn += 1
    ax.set_xscale("log")
    ax.set_xlabel("examples seen (log scale)")
    ax.set_ylabel(METRICS[metric])
    data = sorted({"<stdin>" if d == "-" else os.path.basename(str(d)) for _, h, _ in runs for d in h.get("data", [])})
    ax.set_title(title or ("streamlearn: " + ", ".join(data) if data else "streamlearn learning curves"))
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    fig.tight_layout()
    plan = OutputPlan([("-o", out, "plot")], inputs=[(None, p) for p in paths])
    try:
        plan.stage("-o", lambda f: fig.savefig(f, format=ext))
        plan.commit()
    except BaseException:
        plan.discard()
        raise
    finally:
        plt.close(fig)
    return drawn
