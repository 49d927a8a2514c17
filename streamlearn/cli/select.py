"""``streamlearn select``: print the features a BEAR / MISSION model selected."""
from __future__ import annotations

import click


@click.command(short_help="Print the top-k selected features of a bear/mission model.")
@click.option("-i", "--initial_regressor", "--initial-regressor", "model", required=True,
              type=click.Path(dir_okay=False), help="Model file (bear or mission).")
@click.option("--top_k", "--top-k", "top_k", type=click.IntRange(min=1), default=None,
              help="Features per class to print (default: all the model keeps).")
@click.option("--format", "fmt", type=click.Choice(["tsv", "json"]), default="tsv", show_default=True,
              help="Output format: TSV with a header line, or a JSON list.")
def select(model, top_k, fmt):
    """Print the selected features of MODEL, one per line, sorted by |weight| descending
    (per class for --oaa models): name (namespace^name as in the input), 32-bit hash,
    weight (and class)."""
    from ..api import select as api_select
    from .common import run_api

    run_api(lambda cfg, log: api_select(**cfg), {"model": model, "top_k": top_k, "fmt": fmt})
