"""Training on more than one machine: mergeable model states and a Dask engine.

* :mod:`~streamlearn.distributed.merge`: each learner's pure merge rule over plain NumPy states
  (``streamlearn merge a.slm b.slm -f merged.slm``: :func:`merge_models`);
* :mod:`~streamlearn.distributed.partitions`: the units of work of an input (Parquet files by
  row group from their footers, text files whole);
* :mod:`~streamlearn.distributed.engine`: iterative parameter mixing on ``dask.distributed``
  (``--worker_threads``: on Dask's local threaded scheduler) (``train --engine dask``; McDonald,
  Hall & Mann 2010, "Distributed training strategies for the structured perceptron"; VW's AllReduce
  rule for the adaptive merge, Agarwal et al. 2014, "A reliable effective terascale linear learning
  system"; ``--mix bmuf``: block-wise model-update filtering, Chen & Huo 2016).

Nothing below :mod:`streamlearn.api` knows this package exists: it calls the API's model files
and the learners' ``state_dict`` / ``from_state``.
"""
from __future__ import annotations

__all__ = ["merge_models"]


def merge_models(paths, out: str, log=None) -> dict:
    """Merge the model files ``paths`` (trained from scratch on parts of the data, with the same
    learner, hyper-parameters and hashing settings) into ``out`` (written atomically); returns
    ``{"models": n, "examples": merged examples learned, "model_bytes": size}``.

    Offline: no engine. Different learners / hyper-parameters / hashing settings, or a learner
    without a merge rule, are a :class:`~streamlearn.errors.ConfigError` naming the difference."""
    from ..api import load_model
    from ..errors import ConfigError, ModelFileError
    from ..io.model_file import encode_model
    from ..io.writing import OutputPlan
    from .merge import MergeError, learner_of, merge_states, state_of

    paths = list(paths)
    if not paths:
        raise ConfigError("merge needs at least one model file")
    plan = OutputPlan([("-f", out, "model file")], [("model", p) for p in paths])
    try:
        states = []
        for p in paths:
            learner, reader, _ = load_model(p)
            states.append(state_of(learner, reader))
        try:
            merged = merge_states(states, names=paths)
            learner = learner_of(merged)
        except MergeError as e:
            raise ConfigError(str(e)) from None
        except ValueError as e:  # the merged state does not load: a bug, said plainly
            raise ModelFileError(f"{out}: the merged state is not a valid {merged.algo} model ({e})") from None
        meta, arrays = learner.file_state()
        model = encode_model(learner.name, meta, arrays, merged.reader)
        plan.stage("-f", model.write_to)
        plan.commit()
    finally:
        plan.discard()
    if log:
        log(f"merged {len(paths)} model{'' if len(paths) == 1 else 's'} ({merged.examples} examples learned) into {out} "
            f"({model.size} bytes)")
    return {"models": len(paths), "examples": merged.examples, "model_bytes": model.size}
