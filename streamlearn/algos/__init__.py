"""Learners and the ``LEARNERS`` registry (``--algo NAME`` picks ``LEARNERS[NAME]``).

Each learner lives in ``algos/<name>.py`` with its compiled kernels in
``algos/_<name>_kernels.py``; see :mod:`streamlearn.algos.base` for the protocol.
:func:`make_learner` builds the learner of a run: with ``--oaa K`` a learner that is not
``native_multiclass`` is wrapped in the one-against-all reduction
(:class:`~streamlearn.algos.multiclass.OneAgainstAll`), or, with ``--loss_function
multiclass_logistic``, replaced by its joint softmax learner (``SOFTMAX_LEARNERS``).
:func:`learner_from_state` is its inverse for model files.
"""
from .adagrad import AdaGrad
from .base import COMMON_PARAMS, MULTICLASS_LOSSES, Learner, Param
from .oja_son import OjaSON
from .fd_son import FDSON, RFDSON
from .bear import Bear
from .compadagrad import CompAdaGrad
from .mission import Mission
from .multiclass import OneAgainstAll
from .softmax import SoftmaxAdaGrad
from .sketched_adagrad import FTFSL, FTSL, SADA, FastSADA
from .ftsl_shampoo import FTSLShampoo

__all__ = ["LEARNERS", "SOFTMAX_LEARNERS", "Learner", "Param", "COMMON_PARAMS", "MULTICLASS_LOSSES",
           "get_learner_class", "make_learner", "learner_from_state"]

LEARNERS: dict[str, type[Learner]] = {
    AdaGrad.name: AdaGrad,
    "oja-son": OjaSON,
    FDSON.name: FDSON,
    RFDSON.name: RFDSON,
    Bear.name: Bear,
    Mission.name: Mission,
    SADA.name: SADA, FastSADA.name: FastSADA, FTSL.name: FTSL, FTFSL.name: FTFSL,
    CompAdaGrad.name: CompAdaGrad,
    FTSLShampoo.name: FTSLShampoo,
}

#: ``--loss_function multiclass_logistic``: the joint softmax learner of a binary learner
SOFTMAX_LEARNERS: dict[str, type[Learner]] = {AdaGrad.name: SoftmaxAdaGrad}


def get_learner_class(name: str) -> type[Learner]:
    try:
        return LEARNERS[name]
    except KeyError:
        raise ValueError(f"unknown --algo {name!r}; choose from {', '.join(LEARNERS)}") from None


def make_learner(name: str, hyper: dict) -> Learner:
    """The learner ``--algo name`` with the hyper-parameters ``hyper`` (``ValueError`` for a
    usage error): the class itself, its one-against-all reduction (``--oaa K``), or its softmax
    learner (``--oaa K --loss_function multiclass_logistic``)."""
    cls = get_learner_class(name)
    for p in COMMON_PARAMS:  # before a reduction builds K learners from them
        if hyper.get(p.name) is not None:
            p.check(hyper[p.name])
    K = hyper.get("oaa")
    loss = hyper.get("loss_function")
    if loss in MULTICLASS_LOSSES:
        if not K:
            raise ValueError(f"--loss_function {loss} needs --oaa K (the number of classes)")
        if name not in SOFTMAX_LEARNERS:
            raise ValueError(f"--loss_function {loss} is for --algo {', '.join(SOFTMAX_LEARNERS)}; "
                             f"--algo {name} --oaa K uses "
                             + ("its softmax already" if cls.native_multiclass else "one-against-all"))
        return SOFTMAX_LEARNERS[name](cls, **hyper)
    if K is not None and K != 0 and not cls.native_multiclass:
        return OneAgainstAll(cls, **hyper)
    return cls(**hyper)


def learner_from_state(name: str, meta: dict, arrays: dict) -> Learner:
    """The learner a model file saved (``state_dict()``'s ``meta`` and ``arrays``). A saved
    state is checked before the learner is built and before any kernel sees it (``ValueError``
    naming the field; see :func:`streamlearn.algos.base.loading_model`)."""
    cls = get_learner_class(name)
    if not isinstance(meta, dict):
        raise ValueError("meta is not an object")
    kind = meta.get("reduction")
    if kind == "oaa":
        return OneAgainstAll.restore(cls, meta, arrays)
    if kind == "softmax":
        if name not in SOFTMAX_LEARNERS:
            raise ValueError(f"--algo {name} has no softmax learner")
        return SOFTMAX_LEARNERS[name].restore(cls, meta, arrays)
    if kind is not None:
        raise ValueError(f"unknown reduction {kind!r}")
    return cls.from_state(meta, arrays)
