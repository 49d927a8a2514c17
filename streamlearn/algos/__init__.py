"""Learners and the ``LEARNERS`` registry (``--algo NAME`` picks ``LEARNERS[NAME]``).

Each learner lives in ``algos/<name>.py`` with its compiled kernels in
``algos/_<name>_kernels.py``; see :mod:`streamlearn.algos.base` for the protocol.
"""
from .adagrad import AdaGrad
from .base import COMMON_PARAMS, Learner, Param
from .oja_son import OjaSON
from .bear import Bear
from .mission import Mission

__all__ = ["LEARNERS", "Learner", "Param", "COMMON_PARAMS", "get_learner_class"]

LEARNERS: dict[str, type[Learner]] = {
    AdaGrad.name: AdaGrad,
    "oja-son": OjaSON,
    Bear.name: Bear,
    Mission.name: Mission,
}


def get_learner_class(name: str) -> type[Learner]:
    try:
        return LEARNERS[name]
    except KeyError:
        raise ValueError(f"unknown --algo {name!r}; choose from {', '.join(LEARNERS)}") from None
