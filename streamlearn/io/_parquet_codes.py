"""Row status codes of the Parquet reader's ``assemble_rows`` kernels (numba:
:mod:`streamlearn.io._parquet_kernels`; C: ``cf_assemble_rows`` in ``streamlearn/kernels/_c/cfast.c``,
whose ``#define``\\ s must match), in a module of their own so that the reader on the C path
reports bad rows without importing numba."""

#: a linear feature value is infinite
ROW_INF_VALUE = 1
#: a ``-q`` product of two finite values overflows
ROW_QUADRATIC_OVERFLOW = 2
#: more features than the reader's cap (``max_example_features``) with its interactions
ROW_TOO_MANY_FEATURES = 3
