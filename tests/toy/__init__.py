"""A toy learner, written as a new learner is: a class (``toy.py``) and a kernel module
(``_toy_kernels.py``); ``tests/test_toy_learner.py`` registers it and runs it end to end."""
__all__ = []
