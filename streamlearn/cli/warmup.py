"""``streamlearn warmup``: compile and cache the learners' kernels ahead of their first run."""
from __future__ import annotations

import click

from .options import algo_names


@click.command(short_help="Compile the learners' kernels now (first-run cost, cached afterwards).")
@click.option("--algo", "algos", multiple=True, type=click.Choice(algo_names()),
              help="Learner to prepare (may repeat; default: all).")
def warmup(algos):
    """Compile and cache the numba kernels of the learners (all, or each --algo) by running
    each on a small generated file, so that the first real run starts at once: for images,
    containers and cron hosts. Prints one line per learner with the seconds it took."""
    from ..api import warmup as api_warmup
    from .common import run_api

    run_api(api_warmup, list(algos) or None)
