"""streamlearn: a command-line streaming learner in the style of Vowpal Wabbit.

Layers (imports go downward only): ``cli -> api -> io / algos / evaluate -> kernels``,
with :mod:`streamlearn.batch` beneath all of them; the Python estimators
(:mod:`streamlearn.estimator`: ``Classifier``, ``Regressor``, ``load``, ``progressive_val``)
sit beside ``cli``, above ``api``, and are imported on first use, so that ``import
streamlearn`` stays cheap.
"""
__all__ = ["__version__", "Classifier", "Regressor", "load", "progressive_val"]
__version__ = "0.1.0"

_LAZY = ("Classifier", "Regressor", "load", "progressive_val")


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module("streamlearn.estimator"), name)
    raise AttributeError(f"module 'streamlearn' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
