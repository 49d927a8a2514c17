"""``streamlearn predict``: test-only run of a saved model (no updates)."""
from __future__ import annotations

import click

from .options import PredictCommand, input_options, inspect_options, limit_options, output_options


@click.command(cls=PredictCommand, own_group="Model", short_help="Predict with a saved model (no updates).")
@input_options
@click.option("-i", "--initial_regressor", "--initial-regressor", "initial_model", required=True,
              type=click.Path(dir_okay=False), help="Model file to predict with (needs no other flag).")
@output_options
@inspect_options
@limit_options
def predict(files, data, **kw):
    """Predict FILES with a saved model; reports loss and error when labels are present.

    Predictions go to -p FILE, or to stdout when -p is not given.
    """
    from ..api import RunConfig, predict as api_predict
    from .common import run_api, run_settings
    from .progress import progress_display

    interval, table, monitor = progress_display(kw["progress"], kw["quiet"])
    cfg = RunConfig(data=list(data) + list(files) or ["-"], fmt=kw["fmt"], initial_model=kw["initial_model"],
                    predictions=kw["predictions"] or "-", raw_predictions=kw["raw_predictions"],
                    link=kw["link"], probabilities=kw["probabilities"], progress=interval, table=table, history_file=kw["history_file"],
                    quiet=kw["quiet"], strict=kw["strict"], metrics=kw["metrics"],
                    label_column=kw["label_column"], audit=kw["audit"], invert_hash=kw["invert_hash"],
                    readable_model=kw["readable_model"], max_line_bytes=kw["max_line_bytes"],
                    max_example_features=kw["max_example_features"], **run_settings())
    run_api(api_predict, cfg, monitor=monitor)
