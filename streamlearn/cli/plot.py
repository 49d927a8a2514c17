"""``streamlearn plot``: learning curves of ``--history_file`` runs (needs the ``plot`` extra)."""
from __future__ import annotations

import click

__all__ = ["plot"]


@click.command(short_help="Plot learning curves of --history_file runs.")
@click.argument("histories", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The image to write (format from the extension: .png, .svg, .pdf; written atomically).")
@click.option("--metric", type=click.Choice(["average_loss", "since_last", "error"]), default="average_loss",
              show_default=True, help="The y axis: the progressive average loss, the loss since the previous "
                                      "row, or the progressive error rate.")
@click.option("--title", default=None, help="The figure's title (default: the data files).")
@click.option("--label", "labels", multiple=True,
              help="A run's legend label, in the order of HISTORIES (may repeat; default: the learner "
                   "and the options from each file's header).")
def plot(histories, output, metric, title, labels):
    """Draw HISTORIES (files written by 'streamlearn train --history_file FILE') in one figure:
    one line per run against the examples seen, on a log-scaled axis as VW's table.

    Needs matplotlib: pip install 'streamlearn[plot]'.
    """
    from ..plot import MissingExtra, plot_histories
    from .common import run_api

    def go(_cfg, log=None):
        try:
            return plot_histories(list(histories), output, metric=metric, title=title, labels=list(labels))
        except MissingExtra as e:
            click.echo(f"streamlearn: error: {e}", err=True)
            raise SystemExit(1) from None

    run_api(go, None)
