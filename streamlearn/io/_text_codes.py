"""Format and error codes of the text parsers, and the reason reported for each error code.

Shared by the numba kernels (:mod:`streamlearn.io._text_kernels`) and the C fast path
(:mod:`streamlearn.kernels._cfast`, ``streamlearn/kernels/_c/cfast.c``, whose enum must match), and kept in a
module of its own so that the C path reports malformed lines without importing numba.
"""

__all__ = ["FMT_VW", "FMT_LIBSVM", "ERROR_REASONS"]

FMT_VW = 0
FMT_LIBSVM = 1

# --- status codes of a line (0 = ok) -----------------------------------------------------
ERR_LABEL = 1
ERR_IMPORTANCE = 2
ERR_BASE = 3
ERR_LABEL_TOKENS = 4
ERR_FEATURE_VALUE = 5
ERR_NS_WEIGHT = 6
ERR_NO_COLON = 7
ERR_INDEX = 8
ERR_LABEL_NONFINITE = 9
ERR_IMPORTANCE_NONFINITE = 10
ERR_BASE_NONFINITE = 11
ERR_VALUE_NONFINITE = 12
ERR_NS_WEIGHT_NONFINITE = 13
ERR_VALUE_OVERFLOW = 14
ERR_QUADRATIC_OVERFLOW = 15
ERR_IMPORTANCE_NEGATIVE = 16
ERR_INDEX_RANGE = 17
ERR_TOO_MANY_FEATURES = 18

_NONFINITE = "is NaN or infinite (nan/inf, or beyond the double range like 1e400)"

#: Short text of each error code (the reason reported with ``FILE:LINE``).
ERROR_REASONS = {
    ERR_LABEL: "non-numeric label",
    ERR_IMPORTANCE: "bad importance weight",
    ERR_BASE: "bad base (initial prediction) value",
    ERR_LABEL_TOKENS: "too many tokens before '|' (expected: label [importance [base]] ['tag])",
    ERR_FEATURE_VALUE: "bad feature value (expected name:number)",
    ERR_NS_WEIGHT: "bad namespace weight (expected |namespace:number)",
    ERR_NO_COLON: "LIBSVM token without ':' (expected index:value)",
    ERR_INDEX: "LIBSVM feature index is not a non-negative integer",
    ERR_LABEL_NONFINITE: "label " + _NONFINITE,
    ERR_IMPORTANCE_NONFINITE: "importance weight " + _NONFINITE,
    ERR_BASE_NONFINITE: "base (initial prediction) value " + _NONFINITE,
    ERR_VALUE_NONFINITE: "feature value " + _NONFINITE,
    ERR_NS_WEIGHT_NONFINITE: "namespace weight " + _NONFINITE,
    ERR_VALUE_OVERFLOW: "feature value times its namespace weight overflows the double range",
    ERR_QUADRATIC_OVERFLOW: "-q interaction value (product of two feature values) overflows "
                            "the double range",
    ERR_IMPORTANCE_NEGATIVE: "negative importance weight (use 0 to hold an example out of training, "
                             "as VW says)",
    ERR_INDEX_RANGE: "LIBSVM feature index overflows (beyond 2**63 - 1, where LIBSVM's reader stops too)",
    ERR_TOO_MANY_FEATURES: "too many features with its interactions (more than --max_example_features)",
}
