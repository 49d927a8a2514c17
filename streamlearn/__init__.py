"""streamlearn: a command-line streaming learner in the style of Vowpal Wabbit.

Layers (imports go downward only): ``cli -> api -> io / algos / evaluate -> kernels``,
with :mod:`streamlearn.batch` beneath all of them.
"""
__all__ = ["__version__"]
__version__ = "0.1.0"
