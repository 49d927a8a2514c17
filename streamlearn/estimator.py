"""Estimators in scikit-learn's conventions over the streamlearn learners:
:class:`Classifier` and :class:`Regressor`, plus :func:`load`.

``algo=`` picks the learner (``--algo``) and every learner option is a keyword argument with
the command line's name (``bit_precision``, ``learning_rate``, ``oaa``, ``sketch_size``, ...;
the reader's ``quadratic``, ``cubic``, ``interactions``, ``ignore``, ``keep``,
``ignore_linear``, ``leave_duplicate_interactions``, ``noconstant``, ``unit_norm``; ``passes``
for :meth:`fit`). They are validated when fitting, by the same code as the command line's
(:func:`streamlearn.api.make_learner`, :class:`streamlearn.io.ReaderConfig`).

One hashing contract with the command line (the CLI's reader and the estimators build their
rows with the same compiled kernels, :func:`streamlearn.kernels.assemble_rows` /
:func:`streamlearn.kernels.parse_chunk`, so the constant feature, ``-q`` / ``--cubic`` /
``--interactions``, ``--ignore`` / ``--keep`` / ``--ignore_linear`` and ``--unit_norm`` apply
identically):

* a numpy 2-D array or a scipy sparse matrix: column ``j`` is LIBSVM index ``j + 1`` (what
  ``sklearn.datasets.load_svmlight_file`` gives for a 1-based LIBSVM file such as a9a), i.e.
  feature hash ``j + 1`` in the default namespace; zeros are dropped, NaN / inf are an error;
* a pandas DataFrame or a pyarrow Table whose column names are strings: each column is a
  feature named after it, hashed as the wide Parquet schema hashes it (VW's hash of the name in
  the default namespace); null / NaN cells are missing (dropped, as the Parquet reader does);
  a DataFrame with other column names (``pd.DataFrame(X)``) is taken as its array;
* a list of dicts ``{"name": value}``: VW text features ``name:value`` in the default
  namespace (``{"ns": {"name": value}}``: namespace ``ns``, for ``quadratic=("nm",)``...);
* a list of VW text lines (str): parsed as the command line parses a VW file; their labels are
  used when ``y`` is None.

Classifier labels: two classes are mapped to -1 / +1 (``classes_[0]`` -> -1), more to
``--oaa K`` class ids 1..K in ``classes_`` order, and back. The default loss of a
:class:`Classifier` is ``logistic`` (``predict_proba``: the logistic link of the score; with
``--oaa``, the learner's per-class probabilities), of a :class:`Regressor` ``squared``.

Models cross to the command line both ways: :meth:`save` writes a model file that
``streamlearn predict -i`` reads, :func:`load` reads a file that ``streamlearn train -f``
wrote; pickling (``copy.deepcopy``, ``joblib``, ``sklearn.base.clone``) goes through the same
bytes. scikit-learn is never imported here except by ``__sklearn_tags__`` (which only
scikit-learn calls).

Single examples (River's style): :meth:`learn_one`, :meth:`predict_one`,
:meth:`predict_proba_one` take a dict and run the same kernels on a one-row batch: convenient,
and far slower per example than batches (``benchmarks/api_overhead.py``);
:func:`streamlearn.progressive_val` gives the
command line's progressive-validation figures over a stream of batches.
"""
from __future__ import annotations

import inspect
import itertools
import numbers
import sys
import warnings

import numpy as np

from .api import COMMON_PARAMS, LEARNERS, RunConfig, _reader_config, _reader_settings, make_learner
from .batch import Batch, unit_norm_rows
from .errors import ConfigError, StreamlearnError

__all__ = ["Classifier", "Regressor", "load", "progressive_val", "NotFittedError"]


class NotFittedError(ValueError, AttributeError):
    """An estimator used before :meth:`fit` (as scikit-learn's ``NotFittedError``)."""


def _not_fitted(msg: str) -> NotFittedError:
    """A :class:`NotFittedError`; also scikit-learn's when scikit-learn is already imported
    (``except sklearn.exceptions.NotFittedError`` then catches it; never imported here)."""
    import sys

    sk = sys.modules.get("sklearn.exceptions")
    if sk is None:
        return NotFittedError(msg)
    both = type("NotFittedError", (NotFittedError, sk.NotFittedError), {"__module__": __name__})
    return both(msg)


def _learner_params():
    """Every learner option (``COMMON_PARAMS`` and each registered learner's, first wins)."""
    seen = {}
    for p in COMMON_PARAMS:
        seen.setdefault(p.name, p)
    for cls in LEARNERS.values():
        for p in cls.PARAMS:
            seen.setdefault(p.name, p)
    return list(seen.values())


#: the reader's options (RunConfig fields; ``noconstant`` is the CLI's flag for ``constant``)
_READER_DEFAULTS = (("quadratic", ()), ("cubic", ()), ("interactions", ()), ("leave_duplicate_interactions", False),
                    ("ignore", ()), ("keep", ()), ("ignore_linear", ()), ("noconstant", False), ("unit_norm", False))
_LEARNER_PARAMS = _learner_params()
_PARAM_DEFAULTS = (("algo", None),) + tuple((p.name, None) for p in _LEARNER_PARAMS) + _READER_DEFAULTS + (
    ("passes", 1),)
_PARAM_NAMES = tuple(n for n, _ in _PARAM_DEFAULTS)
_LEARNER_NAMES = frozenset(p.name for p in _LEARNER_PARAMS)


def _signature():
    ps = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
          inspect.Parameter("algo", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
    ps += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d in _PARAM_DEFAULTS[1:]]
    return inspect.Signature(ps)


def _mapping(x) -> bool:
    return isinstance(x, dict) or (hasattr(x, "keys") and hasattr(x, "values") and hasattr(x, "items"))


def _module(x) -> str:
    return type(x).__module__ or ""


class _Base:
    """The parameters mixin (``get_params`` / ``set_params``, scikit-learn's protocol without
    scikit-learn) and everything the two estimators share."""

    _kind = "?"

    def __init__(self, algo=None, **options):
        unknown = sorted(set(options) - set(_PARAM_NAMES))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword argument(s) {', '.join(unknown)} "
                            "(learner options are the command line's names: bit_precision, learning_rate, ...)")
        self.algo = algo
        for name, default in _PARAM_DEFAULTS[1:]:
            setattr(self, name, options.get(name, default))

    # -- parameters ---------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict:
        """Every constructor parameter (scikit-learn's protocol)."""
        return {n: getattr(self, n) for n in _PARAM_NAMES}

    def set_params(self, **params):
        """Set constructor parameters (validated at the next :meth:`fit`); returns self."""
        for k, v in params.items():
            if k not in _PARAM_NAMES:
                raise ValueError(f"Invalid parameter {k!r} for estimator {type(self).__name__}; valid parameters "
                                 "are the command line's option names: " + ", ".join(_PARAM_NAMES))
            setattr(self, k, v)
        return self

    def __repr__(self):
        given = [f"{n}={getattr(self, n)!r}" for n, d in _PARAM_DEFAULTS
                 if not (getattr(self, n) is d or (type(getattr(self, n)) is type(d) and getattr(self, n) == d))]
        return f"{type(self).__name__}({', '.join(given)})"

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags

        tags = Tags(estimator_type="classifier" if self._kind == "classifier" else "regressor",
                    target_tags=TargetTags(required=True), input_tags=InputTags(sparse=True, allow_nan=False))
        # one online pass (progressive validation) over a few hundred rows: not a batch solver's
        # training-set accuracy, which scikit-learn's score thresholds assume
        if self._kind == "classifier":
            tags.classifier_tags = ClassifierTags(poor_score=True)
        else:
            tags.regressor_tags = RegressorTags(poor_score=True)
        return tags

    # -- configuration ------------------------------------------------------------------------
    def _hyper(self, n_classes: int | None) -> dict:
        hyper = {n: getattr(self, n) for n in _LEARNER_NAMES if getattr(self, n) is not None}
        algo = self.algo or "adagrad"
        native = n_classes is not None and n_classes > 2 and getattr(LEARNERS.get(algo), "native_multiclass", False)
        if self._kind == "classifier":
            if not native:  # bear / mission --oaa: their softmax, no --loss_function
                hyper.setdefault("loss_function", "logistic")
            if n_classes is not None and n_classes > 2:
                if hyper.get("oaa") not in (None, n_classes):
                    raise ValueError(f"oaa={hyper['oaa']}, but y has {n_classes} classes (oaa is set from the "
                                     "classes; leave it unset)")
                hyper["oaa"] = n_classes
            elif n_classes == 2 and hyper.get("oaa") not in (None, 0, 2):
                raise ValueError(f"oaa={hyper['oaa']}, but y has 2 classes (oaa is set from the classes; leave it unset)")
        elif hyper.get("oaa"):
            raise ValueError("oaa is for classification: use streamlearn.Classifier")
        return hyper

    def _run_config(self) -> RunConfig:
        def letters(v):
            return (v,) if isinstance(v, str) else tuple(v or ())

        return RunConfig(quadratic=letters(self.quadratic), cubic=letters(self.cubic),
                         interactions=letters(self.interactions),
                         leave_duplicate_interactions=bool(self.leave_duplicate_interactions),
                         ignore=letters(self.ignore), keep=letters(self.keep), ignore_linear=letters(self.ignore_linear),
                         constant=not self.noconstant, unit_norm=bool(self.unit_norm), parse_threads=1)

    def _start(self, n_classes: int | None):
        """A fresh learner and reader for the current parameters (the CLI's validation)."""
        algo = self.algo or "adagrad"
        if not isinstance(algo, str) or algo not in LEARNERS:
            raise ValueError(f"unknown algo {algo!r}; choose from {', '.join(LEARNERS)}")
        if not isinstance(self.passes, numbers.Integral) or isinstance(self.passes, bool) or self.passes < 1:
            raise ValueError(f"passes must be an integer >= 1, got {self.passes!r}")
        if n_classes is not None and LEARNERS[algo].native_multiclass and n_classes > 2 \
                and self.loss_function is not None:
            raise ValueError(f"loss_function does not apply to algo={algo} with more than 2 classes (its "
                             "multiclass learner is a softmax)")
        try:
            cfg = self._run_config()
            reader = _reader_settings(cfg)
            rc = _reader_config(cfg, reader, False)
            learner = make_learner(algo, self._hyper(n_classes))
        except ConfigError as e:
            raise ValueError(str(e)) from None
        self._learner, self._reader, self._rc = learner, reader, rc

    def _fitted(self):
        if getattr(self, "_learner", None) is None:
            raise _not_fitted(f"This {type(self).__name__} instance is not fitted yet: call fit or partial_fit "
                                 "(or streamlearn.load a model file) first")

    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "_learner", None) is not None

    # -- input -> Batch -----------------------------------------------------------------------
    def _check_columns(self, kind, n_features, names, reset):
        if reset:
            self._input = kind
            for a in ("n_features_in_", "feature_names_in_"):
                self.__dict__.pop(a, None)
            if n_features is not None:
                self.n_features_in_ = n_features
            if names is not None:
                self.feature_names_in_ = np.asarray(names, dtype=object)
            return
        want = getattr(self, "n_features_in_", None)
        if kind == "array" and want is not None and n_features != want:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} is expecting {want} features "
                             "as input")
        if kind == "array" and want is None and getattr(self, "_input", None) == "columns":
            raise ValueError(f"X has no column names, but {type(self).__name__} was fitted with named columns "
                             "(a DataFrame / Table): the columns are hashed by name")

    def _rows(self, X, reset: bool):
        """``X`` as a :class:`Batch` (labels NaN unless VW text lines give them) through the
        reader's kernels, and whether the labels came from the text."""
        rc = self._rc
        if isinstance(X, (list, tuple)) and len(X) and isinstance(X[0], str):
            self._check_columns("text", None, None, reset)
            return self._text_rows(X, rc), True
        if isinstance(X, (list, tuple)) and len(X) and _mapping(X[0]):
            self._check_columns("dicts", None, None, reset)
            return self._dict_rows(X, rc), False
        mod = _module(X)
        if mod.startswith("pyarrow"):
            return self._table_rows(X, rc, reset), False
        if mod.startswith("pandas") and hasattr(X, "columns"):
            names = list(X.columns)
            if names and all(isinstance(c, str) for c in names):
                return self._named_rows(names, _frame_matrix(X), rc, reset), False
        if hasattr(X, "tocsr") and mod.startswith("scipy.sparse"):
            return self._sparse_rows(X, rc, reset), False
        return self._dense_rows(X, rc, reset), False

    def _dense_rows(self, X, rc, reset):
        if isinstance(X, (str, dict)):
            raise ValueError("X must be a 2-D array, a sparse matrix, a DataFrame / Table, a list of dicts or "
                             f"a list of VW text lines; got {type(X).__name__}")
        X = _as_float_matrix(X)
        n, d = X.shape
        self._check_columns("array", d, None, reset)
        _check_finite(X, "X")
        from . import kernels
        s, e, idx, val, _ = kernels.wide_part(X, np.arange(1, d + 1, dtype=np.uint32))
        return _assemble(s, e, idx, val, np.full(len(idx), 32, np.uint8), n, rc)

    def _sparse_rows(self, X, rc, reset):
        X = X.tocsr()
        n, d = X.shape
        if n == 0 or d == 0:
            raise ValueError(f"X has {n} samples and {d} features: at least one of each is needed")
        self._check_columns("array", d, None, reset)
        if X.dtype.kind == "c":
            raise ValueError("Complex data not supported")
        val = np.ascontiguousarray(X.data, dtype=np.float64)
        _check_finite(val, "X")
        ip = np.asarray(X.indptr, np.int64)
        idx = (np.asarray(X.indices, np.int64) + 1).astype(np.uint32)
        return _assemble(ip[:-1], ip[1:], idx, val, np.full(len(idx), 32, np.uint8), n, rc)

    def _named_rows(self, names, X, rc, reset):
        self._check_columns("columns", len(names), names, reset)
        if not reset:
            want = list(getattr(self, "feature_names_in_", ()))
            if getattr(self, "_input", None) == "columns" and want and list(names) != want:
                raise ValueError("The feature names should match those that were passed during fit (same "
                                 f"columns in the same order); got {list(names)[:5]}..., fitted with {want[:5]}...")
        if np.isinf(X).any():
            raise ValueError("Input X contains infinity")
        from . import kernels
        s, e, idx, val, _ = kernels.wide_part(X, kernels.hash_strings(list(names), 0))
        return _assemble(s, e, idx, val, np.full(len(idx), 32, np.uint8), X.shape[0], rc)

    def _table_rows(self, X, rc, reset):
        import pyarrow as pa

        if isinstance(X, pa.RecordBatch):
            X = pa.Table.from_batches([X])
        names = list(X.column_names)
        if not names or X.num_rows == 0:
            raise ValueError(f"X (a pyarrow Table) has {X.num_rows} rows and {len(names)} columns: at least one "
                             "of each is needed")
        from .io.parquet import _float64
        cols = []
        for c in names:
            t = X.column(c).type
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                    or pa.types.is_decimal(t)):
                raise ValueError(f"X (a pyarrow Table): column {c!r} has type {t}; the estimators take numeric "
                                 "columns (the wide schema); lists of dicts or VW text lines take the rest")
            cols.append(_float64(X.column(c).combine_chunks(), "X", c))
        M = np.ascontiguousarray(np.column_stack(cols), dtype=np.float64)
        return self._named_rows(names, M, rc, reset)

    def _dict_rows(self, X, rc):
        """A list of ``{name: value}`` (or ``{namespace: {name: value}}``) rows."""
        from . import kernels
        nested = any(_mapping(v) for v in X[0].values())
        if nested:
            return self._namespaced_rows(X, rc)
        n = len(X)
        try:
            lens = np.fromiter(map(len, X), np.int64, count=n)
            names = list(itertools.chain.from_iterable(X))
            vals = np.fromiter(itertools.chain.from_iterable(d.values() for d in X), np.float64, count=int(lens.sum()))
        except (TypeError, ValueError):
            raise ValueError("X: a list of dicts takes {feature name: number} rows (or {namespace: {name: number}})"
                             ) from None
        _check_finite(vals, "X")
        ends = np.cumsum(lens)
        idx = kernels.hash_strings([k if isinstance(k, str) else str(k) for k in names], 0)
        return _assemble(ends - lens, ends, idx, vals, np.full(len(idx), 32, np.uint8), n, rc)

    def _namespaced_rows(self, X, rc):
        from . import kernels
        names, vals, letters, hashes, lens = [], [], [], [], []
        for row in X:
            k = 0
            for ns, feats in row.items():
                if not _mapping(feats):
                    feats, ns_name = {ns: feats}, " "
                else:
                    ns_name = ns
                seed = kernels.namespace_hash(ns_name)
                letter = 32 if ns_name in ("", " ") else str(ns_name).encode("utf-8")[0]
                fn = [f if isinstance(f, str) else str(f) for f in feats]
                names.append((fn, seed))
                vals.extend(feats.values())
                letters.extend([letter] * len(fn))
                k += len(fn)
            lens.append(k)
        for fn, seed in names:
            hashes.append(kernels.hash_strings(fn, seed) if fn else np.zeros(0, np.uint32))
        try:
            v = np.asarray(vals, np.float64)
        except (TypeError, ValueError):
            raise ValueError("X: dict feature values must be numbers") from None
        _check_finite(v, "X")
        lens = np.asarray(lens, np.int64)
        ends = np.cumsum(lens)
        idx = np.concatenate(hashes) if hashes else np.zeros(0, np.uint32)
        return _assemble(ends - lens, ends, idx, v, np.asarray(letters, np.uint8), len(X), rc)

    def _text_rows(self, X, rc):
        from dataclasses import replace

        from .errors import InputError
        from .io.vw_text import parse_vw
        try:
            b = parse_vw("\n".join(x.rstrip("\n") for x in X) + "\n", replace(rc, fmt="vw", strict=True), name="X")
        except InputError as e:
            raise ValueError(f"{e} (a VW text line)") from None
        if b.n != len(X):
            raise ValueError(f"X: {len(X)} VW text lines gave {b.n} examples (blank lines?): one example per line")
        return b

    def _prepare(self, X, y, sample_weight, reset):
        b, from_text = self._rows(X, reset)
        if b.n == 0:
            raise ValueError("Found array with 0 sample(s) (shape=(0, ...)) while a minimum of 1 is required.")
        if y is not None:
            b.labels = self._encode_y(y, b.n)
        elif not from_text:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        else:
            b.labels = self._encode_y(b.labels, b.n)
        if sample_weight is not None:
            w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
            if w.shape != (b.n,):
                raise ValueError(f"sample_weight.shape == {w.shape}, expected ({b.n},)")
            if not np.isfinite(w).all() or (w < 0).any():
                raise ValueError("sample_weight must be finite and non-negative")
            if not w.any():
                raise ValueError("Sample weights must contain at least one non-zero number")
            b.weights = w.copy()
        return b

    def _pred_rows(self, X):
        self._fitted()
        b, _ = self._rows(X, False)
        if b.n == 0:
            raise ValueError("Found array with 0 sample(s) (shape=(0, ...)) while a minimum of 1 is required.")
        b.labels = np.full(b.n, np.nan)
        if self._reader.get("unit_norm"):
            b = unit_norm_rows(b)
        return b

    # -- learning -------------------------------------------------------------------------------
    def _learn(self, batch, passes=1):
        from .evaluate import run_stream
        if self._reader.get("unit_norm"):
            batch = unit_norm_rows(batch)
        try:
            ev = run_stream(self._learner, [batch] * passes, learn=True, strict=True)
        except StreamlearnError as e:
            raise ValueError(str(e)) from None
        return ev

    def fit(self, X, y=None, sample_weight=None):
        """Learn from scratch on ``X, y`` (``passes`` passes, progressive validation as the
        command line's ``train``); returns self."""
        self._learner = None
        self._prepare_fit(X, y, sample_weight, first=True)
        b = self._batch_
        del self._batch_
        self._learn(b, int(self.passes))
        return self

    def partial_fit(self, X, y=None, sample_weight=None, **kw):
        """Learn from ``X, y`` on top of what was learned (one pass); returns self. Learners with
        minibatches (bear, mission) flush theirs at the end of each call, as a run of the
        command line does at the end of its input."""
        first = getattr(self, "_learner", None) is None
        self._prepare_fit(X, y, sample_weight, first=first, **kw)
        b = self._batch_
        del self._batch_
        self._learn(b)
        return self

    # -- model files ------------------------------------------------------------------------------
    def _estimator_header(self) -> dict:
        out = {"kind": self._kind, "input": getattr(self, "_input", None),
               "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.get_params().items()
                          if v is not None and not (isinstance(v, (tuple, list)) and not v)}}
        if hasattr(self, "n_features_in_"):
            out["n_features_in"] = int(self.n_features_in_)
        if hasattr(self, "feature_names_in_"):
            out["feature_names_in"] = [str(c) for c in self.feature_names_in_]
        if hasattr(self, "classes_"):
            c = self.classes_
            out["classes"] = c.tolist()
            out["classes_dtype"] = c.dtype.str if c.dtype.kind in "biufU" else "object"
        return out

    def _model_bytes(self) -> bytes:
        import io

        from .api import _encoded_model
        model = _encoded_model("<estimator>", self._learner, self._reader, self._estimator_header())
        f = io.BytesIO()
        model.write_to(f)
        return f.getvalue()

    def save(self, path) -> int:
        """Write the model file ``path`` (atomically), which ``streamlearn predict -i path``
        and :func:`load` read; returns its size in bytes."""
        from .api import save_model
        self._fitted()
        try:
            return save_model(str(path), self._learner, self._reader, self._estimator_header())
        except StreamlearnError as e:
            raise OSError(str(e)) from None

    def _restore(self, learner, reader, header):
        est = _estimator_settings(header.get("estimator"))
        self._learner, self._reader = learner, dict(reader)
        cfg = RunConfig(quadratic=tuple(reader.get("quadratic", ())), parse_threads=1,
                        **{k: tuple(reader.get(k, ())) for k in ("cubic", "interactions", "ignore", "keep",
                                                                 "ignore_linear")},
                        leave_duplicate_interactions=bool(reader.get("leave_duplicate_interactions")),
                        constant=bool(reader.get("constant", True)), unit_norm=bool(reader.get("unit_norm")))
        self._rc = _reader_config(cfg, reader, False)
        self._input = est.get("input")
        if "n_features_in" in est:
            self.n_features_in_ = int(est["n_features_in"])
        if "feature_names_in" in est:
            self.feature_names_in_ = np.asarray(est["feature_names_in"], dtype=object)
        if self._kind == "classifier":
            if "classes" in est:
                dt = est.get("classes_dtype", "object")
                self.classes_ = np.asarray(est["classes"], dtype=object if dt == "object" else np.dtype(dt))
                if len(self.classes_) != (learner.hyper["oaa"] if learner.multiclass else 2):
                    raise ValueError("model file header is malformed (its classes do not fit the learner)")
            elif learner.multiclass:
                self.classes_ = np.arange(1, learner.hyper["oaa"] + 1)
            else:
                self.classes_ = np.array([-1, 1])

    def __getstate__(self):
        state = {"params": self.get_params()}
        if getattr(self, "_learner", None) is not None:
            state["model"] = self._model_bytes()
        return state

    def __setstate__(self, state):
        from .api import load_model
        for k, v in state["params"].items():
            setattr(self, k, v)
        self._learner = None
        if state.get("model") is not None:
            self._restore(*load_model("<pickled estimator>", data=state["model"]))

    # -- River style -------------------------------------------------------------------------------
    def learn_one(self, x: dict, y, w: float = 1.0, **kw):
        """Learn from one example (a ``{name: value}`` dict, weight ``w``); River's
        ``learn_one``. A one-row batch through the same kernels: far slower per example than
        :meth:`partial_fit` on batches (``benchmarks/api_overhead.py``). A :class:`Classifier` needs
        ``classes=`` on its first call (all the labels it will see), except with bool labels
        (River's binary convention), which mean ``classes=[False, True]``. Returns self."""
        if self._kind == "classifier" and getattr(self, "_learner", None) is None and kw.get("classes") is None:
            if not isinstance(y, (bool, np.bool_)):
                raise ValueError(f"the first learn_one needs classes= (every label it will see, e.g. "
                                 f"classes=[0, 1]); only bool labels imply classes=[False, True] (got y={y!r})")
            kw["classes"] = [False, True]
        return self.partial_fit([x], [y], sample_weight=[w], **kw)

    def predict_one(self, x: dict):
        """The prediction for one example (a dict); River's ``predict_one`` (slow: see :meth:`learn_one`)."""
        return self.predict([x])[0]


class Regressor(_Base):
    """Online regression with a streamlearn learner (``algo=``, default adagrad) in
    scikit-learn's conventions; see :mod:`streamlearn.estimator` for inputs and hashing."""

    _kind = "regressor"

    def __init__(self, algo=None, **options):
        super().__init__(algo, **options)

    def _encode_y(self, y, n):
        y = _as_1d(y, n)
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("y must be numbers for a Regressor") from None
        if not np.isfinite(y).all():
            raise ValueError("Input y contains NaN or infinity")
        return y

    def _prepare_fit(self, X, y, sample_weight, first):
        if first:
            self._start(None)
        self._batch_ = self._prepare(X, y, sample_weight, reset=first)

    def predict(self, X):
        """The learner's predictions (what ``streamlearn predict -p`` writes)."""
        b = self._pred_rows(X)
        pred, _ = self._learner.predict_batch(b)
        return np.asarray(pred, dtype=np.float64)

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions."""
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        p = self.predict(X)
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, np.float64)
        ss_res = float((w * (y - p) ** 2).sum())
        ss_tot = float((w * (y - np.average(y, weights=w)) ** 2).sum())
        if ss_tot == 0:
            return 1.0 if ss_res == 0 else 0.0
        return 1.0 - ss_res / ss_tot


class Classifier(_Base):
    """Online binary or multiclass (``--oaa K`` from the classes) classification with a
    streamlearn learner (``algo=``, default adagrad; loss default logistic) in scikit-learn's
    conventions; see :mod:`streamlearn.estimator` for inputs and hashing."""

    _kind = "classifier"

    def __init__(self, algo=None, **options):
        super().__init__(algo, **options)

    def _encode_y(self, y, n):
        y = _as_1d(y, n)
        if y.dtype.kind == "f":
            if not np.isfinite(y).all():
                raise ValueError("Input y contains NaN or infinity")
        classes = self.classes_
        try:
            pos = np.searchsorted(classes, y)
            pos = np.minimum(pos, len(classes) - 1)
            ok = classes[pos] == y
        except TypeError:
            raise ValueError("y holds labels of mixed types") from None
        if not np.all(ok):
            bad = y[~np.asarray(ok, bool)][0]
            raise ValueError(f"y holds the label {bad!r}, which is not in classes {classes.tolist()}")
        if len(classes) == 2 and not self._learner.multiclass:
            return np.where(pos == 1, 1.0, -1.0)
        return pos.astype(np.float64) + 1.0

    def _prepare_fit(self, X, y, sample_weight, first, classes=None):
        if first:
            if classes is None:
                if y is None:
                    if not (isinstance(X, (list, tuple)) and len(X) and isinstance(X[0], str)):
                        raise ValueError("Classifier requires y to be passed, but the target y is None")
                    yy = None
                else:
                    yy = _as_1d(y, None)
                classes = _classes_of(yy) if yy is not None else None
            else:
                classes = np.unique(_as_1d(classes, None))
            if classes is None:  # VW text labels: read them first
                self.classes_ = np.array([0.0])
                self._start(None)
                b, _ = self._rows(X, True)
                classes = _classes_of(b.labels)
            if len(classes) < 2:
                raise ValueError(f"Classifier needs samples of at least 2 classes in the data, got {len(classes)} "
                                 f"class: {classes.tolist()}")
            self.classes_ = classes
            self._start(len(classes))
        elif classes is not None and not np.array_equal(np.unique(_as_1d(classes, None)), self.classes_):
            raise ValueError(f"classes={list(classes)} differs from the classes of the first partial_fit "
                             f"{self.classes_.tolist()}")
        self._batch_ = self._prepare(X, y, sample_weight, reset=first)

    def partial_fit(self, X, y=None, classes=None, sample_weight=None):
        """Learn from ``X, y`` on top of what was learned; ``classes`` (all the labels that
        will ever be seen) is needed on the first call unless this batch has them all. See
        :meth:`_Base.partial_fit`."""
        return super().partial_fit(X, y, sample_weight=sample_weight, classes=classes)

    def decision_function(self, X):
        """Scores: binary, the learner's score of ``classes_[1]`` (what ``streamlearn predict
        -p`` writes), shape ``(n,)``; multiclass, one column per class (one-against-all: each
        class learner's score; softmax learners: the log of the class probabilities)."""
        b = self._pred_rows(X)
        lrn = self._learner
        if not lrn.multiclass:
            pred, _ = lrn.predict_batch(b)
            return np.asarray(pred, dtype=np.float64)
        if hasattr(lrn, "last_scores"):
            lrn.predict_batch(b)
            return np.array(lrn.last_scores, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return np.log(self._probabilities(b))

    def _probabilities(self, b):
        lrn = self._learner
        if not hasattr(lrn, "set_probabilities"):
            raise ValueError(f"algo={lrn.name} with oaa has no class probabilities")
        try:
            lrn.set_probabilities(True)
        except ValueError as e:
            raise ValueError(f"predict_proba: {e}") from None
        try:
            lrn.predict_batch(b)
            return np.array(lrn.last_probabilities, dtype=np.float64)
        finally:
            lrn.set_probabilities(False)

    def predict_proba(self, X):
        """Class probabilities, shape ``(n, n_classes)`` in ``classes_`` order: binary, the
        logistic link of the score (``streamlearn predict --link logistic``); multiclass, the
        learner's (``streamlearn predict --probabilities``)."""
        b = self._pred_rows(X)
        if self._learner.multiclass:
            return self._probabilities(b)
        pred, _ = self._learner.predict_batch(b)
        with np.errstate(over="ignore"):
            p1 = 1.0 / (1.0 + np.exp(-np.asarray(pred, dtype=np.float64)))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        """The predicted classes (binary: ``classes_[1]`` where the score is > 0)."""
        b = self._pred_rows(X)
        pred, _ = self._learner.predict_batch(b)
        if self._learner.multiclass:
            return self.classes_[np.asarray(pred, dtype=np.int64) - 1]
        return self.classes_[(np.asarray(pred) > 0).astype(np.int64)]

    def score(self, X, y, sample_weight=None):
        """Accuracy of :meth:`predict`."""
        y = np.asarray(y).reshape(-1)
        ok = (self.predict(X) == y).astype(np.float64)
        return float(np.average(ok, weights=sample_weight))

    def predict_proba_one(self, x: dict) -> dict:
        """``{class: probability}`` for one example (River's ``predict_proba_one``; slow)."""
        p = self.predict_proba([x])[0]
        return {c: float(v) for c, v in zip(self.classes_.tolist(), p)}


for _cls in (Classifier, Regressor):
    _cls.__init__.__signature__ = _signature()


# -- helpers ------------------------------------------------------------------------------------


def _data_conversion_warning():
    """scikit-learn's ``DataConversionWarning`` when scikit-learn is loaded (it is not a dependency),
    else ``UserWarning``, its base class."""
    if "sklearn" in sys.modules:
        try:
            from sklearn.exceptions import DataConversionWarning
            return DataConversionWarning
        except ImportError:  # pragma: no cover - a broken scikit-learn install
            pass
    return UserWarning


def _as_1d(y, n):
    if y is None:
        raise ValueError("requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the shape "
                      "of y to (n_samples, ), for example using ravel().", _data_conversion_warning(), stacklevel=3)
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    if n is not None and len(y) != n:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{n}, {len(y)}]")
    if y.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    return y


def _classes_of(y):
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ValueError("Input y contains NaN or infinity")
        if (y != np.round(y)).any() and len(np.unique(y)) > 0.5 * len(y):
            raise ValueError("Unknown label type: continuous. A Classifier takes class labels; for real-valued "
                             "targets use streamlearn.Regressor")
    if y.dtype.kind == "O":
        kinds = {type(v) for v in y.tolist()}
        if len(kinds) > 1:
            raise ValueError(f"Unknown label type: y mixes label types {sorted(k.__name__ for k in kinds)}")
    return np.unique(y)


def _as_float_matrix(X):
    try:
        X = np.asarray(X)
    except (TypeError, ValueError) as e:
        raise ValueError(f"X cannot be read as an array: {e}") from None
    if X.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead. Reshape your data with "
                         "X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one sample")
    if X.dtype.kind not in "biuf":
        X = X.astype(np.float64)  # numbers only (TypeError / ValueError naming what is not one)
    n, d = X.shape
    if n == 0 or d == 0:
        raise ValueError(f"Found array with {n} sample(s) and {d} feature(s) (shape={X.shape}) while a minimum "
                         "of 1 is required.")
    return np.ascontiguousarray(X, dtype=np.float64)


def _frame_matrix(df):
    try:
        return np.ascontiguousarray(df.to_numpy(dtype=np.float64, na_value=np.nan))
    except (TypeError, ValueError) as e:
        raise ValueError(f"X (a DataFrame) must have numeric columns (the wide schema): {e}") from None


def _check_finite(a, what):
    if not np.isfinite(a).all():
        raise ValueError(f"Input {what} contains NaN or infinity (streamlearn's readers refuse them too)")


def _assemble(starts, ends, idx, val, letters, n, rc) -> Batch:
    """One part of rows (``starts`` / ``ends`` into ``idx`` / ``val`` / ``letters``) -> a
    :class:`Batch` with the reader's constant, interactions and namespace filters, through
    the kernel the Parquet reader uses (:func:`streamlearn.kernels.assemble_rows`)."""
    from . import kernels
    from .io._parquet_codes import ROW_INF_VALUE, ROW_QUADRATIC_OVERFLOW

    inter = rc.inter
    terms, toff = inter.arrays(np.unique(letters) if inter.wildcard else None)
    offsets, indices, values, _, status = kernels.assemble_rows(
        np.ascontiguousarray(np.asarray(starts, np.int64).reshape(1, n)),
        np.ascontiguousarray(np.asarray(ends, np.int64).reshape(1, n)),
        np.ascontiguousarray(idx, dtype=np.uint32), np.ascontiguousarray(val, dtype=np.float64),
        np.ascontiguousarray(letters, dtype=np.uint8), terms, toff, inter.nsflags, bool(rc.constant), False,
        rc.max_example_features)
    if status.any():
        i = int(np.flatnonzero(status)[0])
        why = {ROW_INF_VALUE: "a feature value is infinite",
               ROW_QUADRATIC_OVERFLOW: "an interaction's value (product of feature values) overflows"}.get(
            int(status[i]), f"more than {rc.max_example_features} features with its interactions")
        raise ValueError(f"X row {i}: {why}")
    return Batch(offsets, indices, values, np.full(n, np.nan), np.ones(n), source="X")


def _estimator_settings(est) -> dict:
    """A model header's ``estimator`` entry, checked (it is untrusted input: ``ValueError``)."""
    if est is None:
        return {}
    bad = ValueError("model file header is malformed (estimator settings)")
    if not isinstance(est, dict) or not isinstance(est.get("params", {}), dict):
        raise bad
    if "n_features_in" in est and not (isinstance(est["n_features_in"], int) and est["n_features_in"] >= 0):
        raise bad
    for k in ("feature_names_in", "classes"):
        if k in est and not (isinstance(est[k], list) and all(isinstance(v, (str, int, float, bool)) for v in est[k])):
            raise bad
    if "classes" in est:
        dt = est.get("classes_dtype", "object")
        try:
            np.asarray(est["classes"], dtype=object if dt == "object" else np.dtype(dt))
        except (TypeError, ValueError):
            raise bad from None
    return est


def load(path):
    """The estimator of the model file ``path`` (from :meth:`~Classifier.save` or ``streamlearn
    train -f``): a :class:`Classifier` for a model saved by one, a multiclass model or a
    logistic / hinge loss, else a :class:`Regressor`."""
    from .api import load_model
    try:
        learner, reader, header = load_model(str(path))
    except StreamlearnError as e:
        raise OSError(str(e)) from None
    try:
        est = _estimator_settings(header.get("estimator"))
    except ValueError as e:
        raise OSError(f"{path}: {e}") from None
    kind = est.get("kind")
    if kind not in ("classifier", "regressor"):
        kind = "classifier" if learner.multiclass or learner.loss.name in ("logistic", "hinge") else "regressor"
    params = {k: (tuple(v) if isinstance(v, list) else v) for k, v in (est.get("params") or {}).items()
              if k in _PARAM_NAMES}
    if not params:
        params = {"algo": learner.name, "noconstant": not reader.get("constant", True),
                  "unit_norm": bool(reader.get("unit_norm"))}
        for k in ("quadratic", "cubic", "interactions", "ignore", "keep", "ignore_linear"):
            if reader.get(k):
                params[k] = tuple(reader[k])
        for k, v in learner.hyper.items():
            if k in _LEARNER_NAMES and k != "oaa" and v is not None:
                params[k] = v
    obj = (Classifier if kind == "classifier" else Regressor)(**params)
    try:
        obj._restore(learner, reader, header)
    except ValueError as e:
        raise OSError(f"{path}: {e}") from None
    return obj


def progressive_val(stream, estimator, every=None):
    """Progressive validation of ``estimator`` over ``stream``, an iterable of ``(X, y)`` or
    ``(X, y, sample_weight)`` batches (``X`` any input the estimators take; ``y`` may be None
    for VW text lines): each batch is predicted, scored, then learned (:meth:`partial_fit`;
    ``classes`` must be known from the first batch or given with ``estimator.partial_fit``
    beforehand). Yields a dict of the figures the command line's progress table shows
    (``average_loss``, ``since_last``, ``examples``, ``example_weight`` (the cumulative weight,
    as VW's column), ``current_label``, ``current_prediction``, ``current_features``; labels and
    predictions as the learner sees them: -1/+1, class ids) plus ``error_rate`` so far and
    ``seconds``, at VW's rows: cumulative weight 1, 2, 4, ... (``every=N``: every N; ``every=2.0``
    is the doubling), and a last one (``final=True``) for the whole stream, equal to the
    summary's. ``--history_file`` files hold the same rows."""
    from .evaluate import Evaluation, ProgressSchedule, run_stream

    schedule = ProgressSchedule("2.0" if every is None else str(every))
    rows = []
    ev = None

    def emit(*row, **extra):
        rows.append((row, extra))

    for item in stream:
        X, y, sw = item if len(item) == 3 else (*item, None)
        first = getattr(estimator, "_learner", None) is None
        estimator._prepare_fit(X, y, sw, first=first)
        b = estimator._batch_
        del estimator._batch_
        lrn = estimator._learner
        if ev is None:
            ev = Evaluation(lrn.loss_name, lrn.loss.classification, lrn.multiclass,
                            bool(lrn.multiclass and lrn.native_multiclass))
        if estimator._reader.get("unit_norm"):
            b = unit_norm_rows(b)
        try:
            run_stream(lrn, [b], learn=True, schedule=schedule, emit_row=emit, evaluation=ev, strict=True)
        except StreamlearnError as e:
            raise ValueError(str(e)) from None
        for r, extra in rows:
            yield _row_dict(r, extra)
        rows.clear()
    if ev is not None:
        s = ev.summary(estimator._learner.loss)
        yield {"final": True, "examples": s["examples"], "weighted_examples": s["weighted_examples"],
               "average_loss": s["average_loss"], "error_rate": s["error_rate"], "seconds": s["seconds"]}


def _row_dict(row, extra) -> dict:
    keys = ("average_loss", "since_last", "examples", "example_weight", "current_label", "current_prediction",
            "current_features")
    return {"final": False, **dict(zip(keys, row)), "error_rate": extra.get("error"), "seconds": extra.get("seconds")}
