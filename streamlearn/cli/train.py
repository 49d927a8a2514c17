"""``streamlearn train``: one progressive-validation pass, optionally saving the model."""
from __future__ import annotations

import click

from .options import (FEATURES, LEARNER, NAMESPACE_FIELDS, OUTPUT, VWCommand, algo_names, collect_hyper, grouped,
                      input_options, inspect_options, learner_options, limit_options, namespace_options,
                      output_options, vw_compat_options)


@click.command(cls=VWCommand, own_group="Model and passes", short_help="Learn from a stream with progressive validation.")
@input_options
@grouped(LEARNER, click.option("--algo", type=click.Choice(algo_names()), default=None,
                               help="Learning algorithm (default: adagrad, or the model's with -i)."))
@learner_options
@grouped(FEATURES, click.option(
    "-q", "--quadratic", "quadratic", multiple=True, metavar="AB",
    help="Quadratic interactions between namespaces starting with letters A and B (may repeat; "
         "':' is VW's wildcard: '-q ::' pairs every namespace seen, '-q a:' a with each)."))
@namespace_options
@limit_options
@grouped(FEATURES,
         click.option("--noconstant", is_flag=True, help="Do not add the constant (bias) feature."),
         click.option("--unit_norm", "--unit-norm", "unit_norm", is_flag=True,
                      help="Scale every example's feature vector (constant and -q pairs included) to unit L2 "
                           "norm; stored in the model, so predict does the same. For BEAR on raw counts."))
@grouped(OUTPUT, click.option(
    "--binary", is_flag=True,
    help="VW's --binary: predictions are -1/+1 (sign of the score) and the reported loss is 0/1 "
         "(labels -1/+1); kept in the model, so predict does the same."))
@click.option("-i", "--initial_regressor", "--initial-regressor", "initial_model", type=click.Path(dir_okay=False),
              default=None, help="Start from this model file (continue training).")
@click.option("-f", "--final_regressor", "--final-regressor", "final_model", type=click.Path(dir_okay=False, allow_dash=True),
              default=None, help="Save the model to this file at the end (written atomically; '-' = stdout, "
                                 "which must not be a terminal).")
@output_options
@inspect_options
@click.option("-t", "--testonly", "test_only", is_flag=True, help="Predict and score only; no updates.")
@click.option("--passes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Passes over the input files (not stdin or a FIFO: a usage error; save them to a file). "
                   "Every pass is progressive validation over all examples: unlike VW, no holdout and no "
                   "cache file are involved.")
@vw_compat_options
@click.option("--save_on_interrupt", "--save-on-interrupt", "save_on_interrupt", is_flag=True,
              help="On SIGINT/SIGTERM/SIGHUP, still write -f with what was learned so far (complete, atomic; "
                   "a second signal stops at once, without it).")
@click.option("--select_out", "--select-out", "select_out", type=click.Path(dir_okay=False), default=None,
              help="Feature-selection learners: write the selected features (TSV) here at the end.")
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="local: one process. dask: iterative parameter mixing on dask.distributed (each pass, "
                   "every worker learns a chain of partitions from the merged state, the states merged; "
                   "pip install 'streamlearn[dask]').")
@click.option("--scheduler", default=None, metavar="ADDR",
              help="--engine dask: the address of a running Dask scheduler (tcp://host:8786); default: an "
                   "embedded LocalCluster started and stopped by the run.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="--engine dask: worker processes of the embedded LocalCluster (default: the cores).")
@click.option("--skip_bad_partitions", "--skip-bad-partitions", "skip_bad_partitions", is_flag=True,
              help="--engine dask: leave out (with a warning) a partition that fails to parse, instead of "
                   "failing the run.")
@click.option("--save_every_pass", "--save-every-pass", "save_every_pass", is_flag=True,
              help="--engine dask: also write -f (atomically) after every pass, with the merged state so far.")
@click.option("--worker_threads", "--worker-threads", "worker_threads", is_flag=True,
              help="--engine dask, embedded cluster: run the --workers as threads of this process on dask's "
                   "threaded scheduler (no worker processes to start, no dask.distributed import, no states serialised; the kernels and the Parquet reader release the GIL), "
                   "without per-worker memory limits or crash isolation.")
@click.option("--mix", type=click.Choice(["auto", "vw", "bmuf", "bmuf-nesterov", "linesearch", "linesearch-learned",
                                        "linesearch-last"]),
              default=None,
              help="--engine dask, adagrad, SON and sketch learners: how each pass's chains mix. auto (default): "
                   "linesearch-last for plain adagrad (binary or regression, not --oaa or --sgd) and linesearch for "
                   "oja-son, fd-son, rfd-son, bear and mission (binary or regression), with 2 or more passes and chains, "
                   "else vw. vw: VW's AllReduce (the other learners: their own merge) "
                   "average; bmuf / bmuf-nesterov: that average's update filtered by block momentum 1 - 1/chains "
                   "(BMUF, Chen & Huo 2016; classical or Nesterov); linesearch (plain adagrad, not --oaa; binary oja-son, "
                   "fd-son, rfd-son, bear, mission: scored by the learner's own predictions): the average's move "
                   "from the pass's start times alpha in [1, chains] (SON learners: also 0.25, 0.5, 0.75), plus the previous pass's move times beta in "
                   "[0, 1], the pair with the least loss on every 10th row of each partition, held out of learning "
                   "(linesearch-learned: those rows learned too; linesearch-last, not --sgd: held out until the last "
                   "pass, which learns them and judges each by the merge of the other chains).")
def train(files, data, algo, quadratic, noconstant, unit_norm, binary, **kw):
    """Train on FILES (VW text, LIBSVM or Parquet; gzip ok; '-' or none = stdin).

    Every example is predicted and scored before it is learned (progressive validation);
    VW's progress table and summary go to stderr.
    """
    from ..api import RunConfig, train as api_train
    from .common import run_api, run_settings
    from .progress import progress_display

    hyper = collect_hyper(kw)
    interval, table, monitor = progress_display(kw["progress"], kw["quiet"])
    for k in ("holdout_off", "cache", "cache_file"):  # accepted for VW scripts; no effect here
        kw.pop(k, None)
    ns = {k: (kw.pop(k) if isinstance(kw[k], bool) else tuple(kw.pop(k))) for k in NAMESPACE_FIELDS}
    cfg = RunConfig(data=list(data) + list(files) or ["-"], fmt=kw["fmt"], algo=algo, hyper=hyper,
                    quadratic=tuple(quadratic), constant=not noconstant, unit_norm=unit_norm,
                    initial_model=kw["initial_model"], final_model=kw["final_model"],
                    predictions=kw["predictions"], raw_predictions=kw["raw_predictions"], binary=binary,
                    link=kw["link"], probabilities=kw["probabilities"], test_only=kw["test_only"],
                    passes=kw["passes"], progress=interval, table=table, history_file=kw["history_file"],
                    quiet=kw["quiet"], strict=kw["strict"],
                    metrics=kw["metrics"], save_on_interrupt=kw["save_on_interrupt"],
                    select_out=kw["select_out"], label_column=kw["label_column"], audit=kw["audit"],
                    invert_hash=kw["invert_hash"], readable_model=kw["readable_model"], **ns,
                    max_line_bytes=kw["max_line_bytes"], max_example_features=kw["max_example_features"],
                    **run_settings())
    engine = {k: kw.pop(k) for k in ("engine", "scheduler", "workers", "skip_bad_partitions", "save_every_pass",
                                     "worker_threads", "mix")}
    if engine.pop("engine") == "dask":
        engine["mix"] = engine["mix"] or "auto"
        from ..distributed.engine import train_dask

        run_api(lambda c, log: train_dask(c, log=log, **engine), cfg)
        return
    given = [f"--{k}" for k, v in engine.items() if v]
    if given:
        raise click.UsageError(f"{', '.join(given)}: only with --engine dask")
    run_api(api_train, cfg, monitor=monitor)
