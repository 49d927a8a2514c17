"""``streamlearn merge``: merge model files trained on parts of the data (offline, no engine)."""
from __future__ import annotations

import click


@click.command(short_help="Merge models trained on parts of the data into one.")
@click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-f", "--final_regressor", "--final-regressor", "out", required=True,
              type=click.Path(dir_okay=False), help="The merged model file (written atomically).")
@click.option("--quiet", is_flag=True, help="Print nothing on success.")
def merge(models, out, quiet):
    """Merge MODELS (same --algo, hyper-parameters and hashing settings, each trained from
    scratch) into one, by the learner's rule: adagrad (and --oaa) by VW's AllReduce weighted
    average, bear / mission by averaging their Count Sketches and rebuilding the top-k heap,
    oja-son / fd-son / rfd-son by key over their per-feature tables and by merging their sketches
    (frequent directions: stack and shrink; Oja: approximately). Learners without a merge rule
    (s-ada, ftsl, ...) and differing settings are a usage error naming the difference."""
    from ..distributed import merge_models
    from .common import run_api, stderr_log

    run_api(lambda cfg, log: merge_models(cfg["models"], cfg["out"], log=None if quiet else stderr_log),
            {"models": list(models), "out": out})
