"""The learner protocol shared by every algorithm.

A learner is a small class: hyper-parameters in the constructor, state as NumPy arrays,
compiled work in a sibling ``_<name>_kernels.py`` module (imported lazily, so that
``streamlearn --help`` never loads numba).

Protocol
--------
``name``, ``PARAMS``
    The ``--algo`` name and the declarative hyper-parameters (:class:`Param`). The CLI turns
    each into an option (``--name``, kebab-case alias, optional short flag); the model file
    stores them all. Registering the class in ``algos.LEARNERS`` is all a new learner needs.
``check_options(given)`` (classmethod)
    Usage errors among the options given on the command line (``ValueError``), before the
    learner is built; e.g. the sketch learners refuse ``--loss_function`` with ``--oaa``.
``multiclass``, ``loss_name``, ``losses``
    Whether predictions are class ids; the loss the run reports (e.g. ``softmax``); the
    ``--loss_function`` values the kernels take (others are a usage error naming the learners
    that take them).
``last_raw`` (optional)
    After ``learn_batch`` / ``predict_batch``: the batch's scores before clipping, for ``-r``
    (learners that clip their predictions set it; otherwise ``-r`` writes the predictions).
``native_multiclass``
    True for a learner that handles ``--oaa K`` itself (BEAR, MISSION: per-class sketches and
    softmax). Any other learner gets ``--oaa K`` from the generic one-against-all reduction
    (:mod:`streamlearn.algos.multiclass`: K copies of the binary learner) without code of its
    own; ``algos.make_learner`` chooses.
``probabilities`` / ``last_probabilities`` (multiclass learners)
    ``set_probabilities(True)`` asks for per-class probabilities; each learn / predict call
    then leaves them in ``last_probabilities`` (``(n, K)``) for ``-p``. A multiclass
    learner's ``loss`` is its per-example cross-entropy (the run reports the 0/1 loss as the
    average loss, as VW's ``--oaa``, and the cross-entropy in its own field).
``wants_names``
    True if the readers should keep feature-name spans for this learner (default False).
``selects_features`` / ``top_features(refresh=True)``
    Learners with a top-k set (BEAR, MISSION) set ``selects_features`` and return their
    members as ``(cls, hashes, weights, names)`` (see ``streamlearn select``).
``bad_labels(labels)`` / ``label_problem(label)``
    Rows the learner cannot learn from (skipped and reported like malformed lines).
``learn_batch(batch) -> (pred, loss)``
    Progressive validation, inside the kernel: for every example in order, predict, record
    the prediction and its loss, then learn (unlabeled rows: predict only). ``pred`` is the
    raw prediction (class id for multiclass learners); ``loss`` is ``NaN`` where unlabeled.
    Results never depend on how the stream is cut into batches.
``predict_batch(batch) -> (pred, loss)``
    Same, without updates. By default both call ``_run(batch, learn)``.
``finish()``
    End of stream: flush buffered updates (minibatch learners).
``compiled_kernels`` / ``compiles_on_first_use()``
    The numba kernels a run calls (``(lazy module, name)`` pairs); whether they are not cached
    yet, so that the run can say it is compiling (first run only).
``extra_summary() -> dict``
    Extra figures for the run summary / metrics (e.g. a sketch's compression factor).
``state_dict() -> (meta, arrays)`` / ``from_state(meta, arrays)``
    ``meta`` is JSON-able (``algo`` plus every hyper-parameter and counter); ``arrays`` a dict
    of NumPy arrays, or of :class:`~streamlearn.memory.SparseTable` for big hashed tables whose
    touched pages the learner tracks (:class:`~streamlearn.memory.PageSet`), so that a ``-b 32``
    model saves and loads in O(touched entries); ``from_state`` takes either form. ``from_state(*state_dict())`` must give a learner whose every future
    prediction and update is bit-identical. A learner implements ``_arrays`` /
    ``_load_arrays`` (usually loops over the fields of its kernel state tuple) and, for
    non-array state, ``_extra_meta`` / ``_load_extra_meta``.
``saved_shapes(hyper)`` / ``build_bytes(hyper)`` (classmethods) and ``_load_arrays``' checks
    A model file is untrusted input: ``from_state`` checks the saved hyper-parameters' types,
    the shapes ``saved_shapes`` derives from them and the memory ``build_bytes`` says building
    takes (against the file's size) before building, every float array finite, and
    ``_load_arrays`` checks every index array its kernels follow against its range (or
    rebuilds it), raising ``ValueError``; see :func:`loading_model`.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..memory import SparseTable, lazy_copy, lazy_zeros  # noqa: F401  (re-exported for the learners)

from .losses import Loss, get_loss

__all__ = ["Param", "Learner", "COMMON_PARAMS", "MULTICLASS_LOSSES", "MAX_CLASSES", "lazy_zeros", "loading_model",
           "adopt", "adopting", "load_budget", "all_nonnegative", "check_saved_meta", "check_saved_arrays", "require"]


@dataclass(frozen=True)
class Param:
    """One hyper-parameter: its CLI option is ``--<name>``.

    ``structural`` parameters fix the shape of the state and cannot change when training
    continues from a saved model (``-i``); the others may be overridden on the command line.

    ``low`` / ``high`` bound a number (inclusive; ``low_open`` / ``high_open``: exclusive);
    ``why`` says what the upper bound protects (memory, time per example). A float must also be
    finite (``finite=False``: not NaN; an infinity within the bounds means "never"). :meth:`check` enforces them for every value given (the command line, the Python
    API, a model file's header and an override with ``-i``): a value out of range is a
    ``ValueError`` naming the option, never a learner built with it.
    """

    name: str
    type: Any  # int, float, bool, str or a tuple of allowed strings
    default: Any
    help: str
    short: str | None = None
    structural: bool = False
    low: Any = None
    high: Any = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""
    finite: bool = True  # False: +-inf is meaningful (e.g. "never"); NaN never is
    #: the value a model saved before this parameter existed had in effect (None: the default),
    #: so that such a model continues as it was trained
    absent: Any = None

    @property
    def flag(self) -> str:
        """The option as the messages name it (``-l/--learning_rate``)."""
        return f"{self.short}/--{self.name}" if self.short else f"--{self.name}"

    def range_text(self) -> str:
        """The accepted values, e.g. ``> 0``, ``in 1..32``, ``in (0, 1]`` ('' for no bound)."""
        lo, hi = self.low, self.high
        if lo is not None and hi is not None:
            if self.type is int and not self.low_open and not self.high_open:
                return f"in {lo}..{hi}"
            return f"in {'(' if self.low_open else '['}{lo}, {hi}{')' if self.high_open else ']'}"
        if lo is not None:
            return f"{'>' if self.low_open else '>='} {lo}"
        if hi is not None:
            return f"{'<' if self.high_open else '<='} {hi}"
        return ""

    def check(self, value) -> None:
        """Raise ``ValueError`` unless ``value`` is a number of this parameter's type within its
        bounds (floats: finite). Other types (flags, choices) are not checked here."""
        if self.type not in (int, float):
            return
        import math
        import numbers

        integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        if self.type is int and not integral:
            raise ValueError(f"{self.flag} must be an integer, got {value!r}")
        if self.type is float and not (integral or isinstance(value, numbers.Real)) or isinstance(value, bool):
            raise ValueError(f"{self.flag} must be a number, got {value!r}")
        if self.type is float and (math.isnan(value) or (self.finite and math.isinf(value))):
            raise ValueError(f"{self.flag} must be a {'finite ' if self.finite else ''}number, got {value!r}")
        lo, hi = self.low, self.high
        if lo is not None and (value <= lo if self.low_open else value < lo):
            raise ValueError(f"{self.flag} must be {'>' if self.low_open else '>='} {lo}, got {value!r}")
        if hi is not None and (value >= hi if self.high_open else value > hi):
            why = f" ({self.why})" if self.why else ""
            raise ValueError(f"{self.flag} must be {'<' if self.high_open else '<='} {hi}{why}, got {value!r}")


#: the most classes --oaa takes (per example K scores; K learners' state)
MAX_CLASSES = 1 << 16

COMMON_PARAMS = (
    Param("bit_precision", int, 18, "Number of bits in the feature table (weights index = hash mod 2^b).",
          short="-b", structural=True, low=1, high=32),
    Param("loss_function", ("squared", "logistic", "hinge", "quantile", "multiclass_logistic"), "squared",
          "Loss function: squared, logistic, hinge or quantile (VW's pinball loss, --quantile_tau; "
          "adagrad only); with --oaa: of each class's binary learner; multiclass_logistic: softmax "
          "cross-entropy over the --oaa K classes, one joint learner (adagrad).", structural=True),
    Param("random_seed", int, 0, "Seed of every random choice a learner makes (bear/mission: the Count "
          "Sketch hash functions; oja-son: the features its sketch starts on, seed 0 the first learned from); the same "
          "data, options and seed give byte-identical models.",
          structural=True, low=0, high=2**64 - 1),
    Param("oaa", int, None, "Multiclass with K classes (labels 1..K; others are skipped): one-against-all "
          "over K binary learners, each with -b minus ceil(log2 K) bits as VW's --oaa (bear, mission: "
          "one sketch + heap per class and softmax); the prediction is the class id.", structural=True,
          low=0, high=MAX_CLASSES, why="every example gets K scores, every class its learner's state"),
)

#: Loss functions that are not a binary learner's: they need ``--oaa K`` and a joint learner.
MULTICLASS_LOSSES = ("multiclass_logistic",)


# -- loading a saved state (a model file is untrusted input) ----------------------------------
#
# ``from_state`` checks a saved state before the learner is built and before a kernel sees it:
# the hyper-parameters' types and ranges (:func:`check_saved_meta`), every fixed-shape array's
# shape and dtype against the hyper-parameters (``saved_shapes``), the memory that building the
# learner takes against what the file holds (``build_bytes``, inside :func:`loading_model`),
# finite floats (:func:`check_saved_arrays`), then each learner's index arrays against their
# ranges (``_load_arrays``). Any failure is a ``ValueError`` naming the array or field; the api
# turns it into one ``ModelFileError`` line naming the file.

#: (memory budget in bytes or None, whether the arrays are the reader's own buffers)
_LOADING = contextvars.ContextVar("streamlearn_loading", default=(None, False))
#: building a learner from a model file may take at most this multiple of the file's size ...
LOAD_MEMORY_FACTOR = 8
#: ... plus this (a model's fixed overhead: a small file's learner still has its tables)
LOAD_MEMORY_SLACK = 32 << 20


@contextlib.contextmanager
def loading_model(file_bytes: int):
    """Within: ``from_state`` refuses a state whose learner would take more than
    ``LOAD_MEMORY_FACTOR * file_bytes + LOAD_MEMORY_SLACK`` bytes to build (a memory bomb:
    a small file declaring huge tables), and keeps the given arrays without copying them (they
    are the model reader's own buffers)."""
    token = _LOADING.set((LOAD_MEMORY_FACTOR * int(file_bytes) + LOAD_MEMORY_SLACK, True))
    try:
        yield
    finally:
        _LOADING.reset(token)


def load_budget():
    """The memory a learner being loaded may take to build (bytes), or None outside
    :func:`loading_model`."""
    return _LOADING.get()[0]


def adopting() -> bool:
    """Whether the arrays being loaded are the model reader's own (no copy needed)."""
    return _LOADING.get()[1]


def require(ok, why: str) -> None:
    """``ValueError(why)`` unless ``ok`` (a saved state's check)."""
    if not ok:
        raise ValueError(why)


def adopt(name: str, a, shape=None, dtype=None, lazy: bool = False) -> np.ndarray:
    """The saved array ``a`` as the learner's own (checked ``shape`` / ``dtype`` when given):
    a :class:`SparseTable` densified (untouched pages never resident), a model reader's buffer
    kept as it is (inside :func:`loading_model`), anything else copied (``lazy``:
    :func:`lazy_copy`, for big hashed tables)."""
    if dtype is not None and np.dtype(a.dtype) != np.dtype(dtype):
        raise ValueError(f"array {name}: dtype {a.dtype}, expected {np.dtype(dtype)}")
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ValueError(f"array {name}: shape {tuple(a.shape)}, expected {tuple(shape)}")
    if isinstance(a, SparseTable):
        budget = load_budget()
        if shape is None and budget is not None and a.nbytes > budget:  # a size the file chose, not the hyper
            raise ValueError(f"array {name}: {a.nbytes / 2**20:.0f} MiB declared, far more than the file holds")
        return a.dense()
    a = np.asarray(a)
    if _LOADING.get()[1] and a.flags.c_contiguous and a.flags.writeable and a.flags.owndata:
        return a
    return lazy_copy(a) if lazy else np.array(a, copy=True, order="C")


def _param_ok(p: "Param", v) -> bool:
    if v is None:
        return p.default is None
    if p.type is bool:
        return isinstance(v, bool)
    if p.type is int:
        return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 62
    if p.type is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if isinstance(p.type, tuple):
        return isinstance(v, str) and v in p.type
    return isinstance(v, p.type)


def check_saved_meta(params, meta) -> dict:
    """The saved hyper-parameters of ``meta`` (``ValueError`` unless ``meta`` is an object whose
    ``hyper`` is an object of known names, each of its parameter's type: an int, a finite
    float, a bool, one of the allowed strings, or null where the default is; and whose
    ``examples_learned`` is a non-negative integer)."""
    require(isinstance(meta, dict), "meta is not an object")
    hyper = meta.get("hyper")
    require(isinstance(hyper, dict), "meta.hyper is not an object")
    known = {p.name: p for p in params}
    for k, v in hyper.items():
        require(k in known, f"unknown hyper-parameter {k!r}")
        require(_param_ok(known[k], v), f"hyper-parameter {k} = {v!r} is not a valid "
                + (known[k].type.__name__ if isinstance(known[k].type, type) else "choice"))
    n = meta.get("examples_learned", 0)
    require(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 62,
            f"examples_learned = {n!r} is not a count")
    return hyper


def all_nonnegative(a) -> bool:
    """True when no entry of ``a`` (an array or a :class:`SparseTable`, by its stored values;
    checked in blocks: no full-size temporary, no scan of a lazy table's untouched pages
    beyond reading them) is negative."""
    if isinstance(a, SparseTable):
        return bool((a.vals >= 0).all())
    flat = np.ascontiguousarray(a).reshape(-1)
    step = 1 << 22
    return all(bool((flat[i:i + step] >= 0).all()) for i in range(0, flat.size, step))


def check_saved_arrays(arrays: dict, shapes: dict) -> None:
    """``ValueError`` unless every array of ``shapes`` (``name -> (shape, dtype)``) is there
    with that dtype and shape (or its flattening), and every float array is finite (a model is
    never saved with NaN / inf)."""
    for name, (shape, dt) in shapes.items():
        require(name in arrays, f"array {name} is missing")
        a = arrays[name]
        shape = tuple(int(d) for d in shape)
        flat = (int(np.prod(shape, dtype=object)),)
        require(np.dtype(a.dtype) == np.dtype(dt) and tuple(a.shape) in (shape, flat),
                f"array {name}: shape/dtype {tuple(a.shape)}/{a.dtype} does not fit {shape}/{np.dtype(dt)}")
    for name, a in arrays.items():
        if np.dtype(a.dtype).kind == "f":
            require(_all_finite(a), f"array {name} holds NaN or inf")


def _all_finite(a) -> bool:
    """Every entry of ``a`` finite (a :class:`SparseTable` by its stored values; in blocks)."""
    if isinstance(a, SparseTable):
        return bool(np.isfinite(a.vals).all())
    flat = np.ascontiguousarray(a).reshape(-1)
    step = 1 << 22
    return all(bool(np.isfinite(flat[i:i + step]).all()) for i in range(0, flat.size, step))


class Learner:
    """Base class: stores the common hyper-parameters and implements the plumbing."""

    name: ClassVar[str] = "?"
    PARAMS: ClassVar[tuple[Param, ...]] = ()
    multiclass: ClassVar[bool] = False
    #: the --loss_function values the learner's kernels take
    losses: ClassVar[tuple] = ("squared", "logistic", "hinge")
    native_multiclass: ClassVar[bool] = False
    wants_names: ClassVar[bool] = False
    selects_features: ClassVar[bool] = False

    def __init__(self, **hyper):
        known = {p.name: p for p in COMMON_PARAMS + self.PARAMS}
        unknown = set(hyper) - set(known)
        if unknown:
            from . import LEARNERS
            parts = []
            for u in sorted(unknown):
                takers = [n for n, c in LEARNERS.items() if any(p.name == u for p in c.PARAMS)]
                parts.append(f"--{u}" + (f" (taken by --algo {', '.join(takers)})" if takers else ""))
            raise ValueError(f"--algo {self.name} does not take option(s): " + ", ".join(parts))
        common = {p.name for p in COMMON_PARAMS}
        for name, v in hyper.items():
            if v is not None:
                try:
                    known[name].check(v)
                except ValueError as e:  # a learner's own range (learners sharing an option may differ)
                    raise ValueError(str(e) if name in common else f"--algo {self.name}: {e}") from None
        self.hyper = {}
        for p in known.values():
            v = hyper.get(p.name)
            self.hyper[p.name] = p.default if v is None else v
        self.bits = int(self.hyper["bit_precision"])
        if not 1 <= self.bits <= 32:
            raise ValueError(f"-b/--bit_precision must be in 1..32, got {self.bits}")
        self.mask = (1 << self.bits) - 1
        if self.hyper["oaa"] and not self.native_multiclass:
            raise ValueError(f"--algo {self.name} takes --oaa through the one-against-all reduction "
                             "(streamlearn.algos.make_learner), not directly")
        if self.hyper["loss_function"] in MULTICLASS_LOSSES:
            raise ValueError(f"--loss_function {self.hyper['loss_function']} needs --oaa K (and --algo adagrad)")
        if self.hyper["loss_function"] not in self.losses + MULTICLASS_LOSSES:
            from . import LEARNERS
            takers = [n for n, c in LEARNERS.items() if self.hyper["loss_function"] in c.losses]
            raise ValueError(f"--algo {self.name} does not take --loss_function {self.hyper['loss_function']}; "
                             f"it is taken by --algo {', '.join(takers)}")
        self.loss: Loss = get_loss(self.hyper["loss_function"])
        self.examples_learned = 0

    # -- protocol ---------------------------------------------------------------------------
    @classmethod
    def check_options(cls, given: dict) -> None:
        """Raise ``ValueError`` for a combination of the options ``given`` (those set on the
        command line, by name) that makes no sense for this learner; checked before
        construction when training starts from scratch."""

    def top_features(self, refresh: bool = True):
        """The selected features as ``(cls, hashes, weights, names)`` (``selects_features``
        learners only)."""
        raise NotImplementedError(f"--algo {self.name} does not select features")

    def learn_batch(self, batch):
        return self._run(batch, True)

    def predict_batch(self, batch):
        return self._run(batch, False)

    def _run(self, batch, learn: bool):
        """Progressive validation over ``batch`` (updates only if ``learn``): what the default
        :meth:`learn_batch` / :meth:`predict_batch` call."""
        raise NotImplementedError

    @property
    def loss_name(self) -> str:
        """The loss the learner minimises, as the summary, the metrics and the settings name it."""
        return self.loss.name

    def bad_labels(self, labels):
        """Boolean mask of the rows whose label this learner cannot learn from (the run skips
        and reports them like malformed lines), or None when every label is usable."""
        return None

    def label_problem(self, label) -> str:
        """Why ``label`` is one of :meth:`bad_labels`' rows (for the warning)."""
        return f"label {label:g} is not usable"

    #: the numba kernels a run calls, as ``(lazy kernel module, function name)`` pairs: what
    #: :meth:`compiles_on_first_use` checks
    compiled_kernels: ClassVar[tuple] = ()

    def compiles_on_first_use(self) -> bool:
        """Whether this process will compile kernels (no numba cache yet: a first run, seconds
        to a minute), so that the caller can say so before it happens."""
        from ..kernels import is_cached

        return any(not is_cached(getattr(mod, name)) for mod, name in self.compiled_kernels)

    def finish(self) -> None:
        """End of stream (or of a pass): learn from anything still buffered (e.g. a partial
        minibatch). Predictions are never delayed; only updates may be."""

    def extra_summary(self) -> dict:
        """Learner-specific figures for the end-of-run summary and the metrics JSON."""
        return {}

    # -- inspection (VW's --audit / --readable_model / --invert_hash; optional) ---------------
    #: whether the learner keeps one weight per masked hash (``--readable_model`` /
    #: ``--invert_hash`` need :meth:`readable_weights`)
    per_hash_weights: ClassVar[bool] = False

    def audit_columns(self, hashes) -> list:
        """The state ``--audit`` prints for the features with 32-bit ``hashes``, read before
        the example's update: ``[weight]`` or ``[weight, extra]`` arrays (VW: ``weight@adaptive
        sum``), or ``[]`` when the learner has no meaningful weight per feature (the audit then
        lists name, index, value)."""
        return []

    def readable_weights(self):
        """``(indices, [columns])`` of every masked index with a nonzero weight, by index
        (``--readable_model``; ``per_hash_weights`` learners)."""
        raise NotImplementedError(f"--algo {self.name} has no weight per hash")

    @property
    def name_mask(self) -> int:
        """``--invert_hash``: the mask that turns a feature's 32-bit hash into the key
        :meth:`readable_name_keys` returns (a class learner's under ``--oaa``)."""
        return self.mask

    def readable_name_keys(self, idx):
        """``(keys, suffixes)`` of the readable-model indices ``idx``: the masked feature hash
        whose first name ``--invert_hash`` prints (as :attr:`name_mask` masks it), and a
        suffix after that name (``None``: none; VW's ``[c]`` for class c > 0 of ``--oaa``)."""
        return idx, None

    def label_range(self):
        """The smallest and largest label seen (VW's ``Min label`` / ``Max label``)."""
        return 0.0, 0.0

    def _arrays(self) -> dict:
        raise NotImplementedError

    def _load_arrays(self, arrays: dict) -> None:
        raise NotImplementedError

    def state_dict(self):
        meta = {"algo": self.name, "hyper": dict(self.hyper), "examples_learned": self.examples_learned}
        meta.update(self._extra_meta())
        return meta, self._arrays()

    def file_state(self):
        """:meth:`state_dict` as a model file is written from (the same bytes): a learner may give arrays
        that the writer reads without building them (:class:`~streamlearn.memory.MovedAxis`)."""
        return self.state_dict()

    def _extra_meta(self) -> dict:
        return {}

    def _load_extra_meta(self, meta: dict) -> None:
        pass

    @classmethod
    def saved_shapes(cls, hyper: dict) -> dict:
        """``name -> (shape, dtype)`` of the saved arrays whose shape the hyper-parameters fix
        (checked before the learner is built; ``ValueError`` for hyper-parameters that are
        out of range). Learners whose tables are large override it."""
        return {}

    @classmethod
    def build_bytes(cls, hyper: dict) -> int:
        """Bytes that building the learner with ``hyper`` writes (tables it fills; lazily
        allocated zeros cost nothing until touched): checked against the model file's size
        before building (:func:`loading_model`)."""
        return 0

    @classmethod
    def check_saved(cls, meta: dict, arrays: dict) -> dict:
        """Check a saved state before the learner is built (see :func:`loading_model`);
        returns the hyper-parameters."""
        params = COMMON_PARAMS + cls.PARAMS
        hyper = dict(check_saved_meta(params, meta))
        for p in params:  # a parameter newer than the model: what was in effect when it was saved
            if p.name not in hyper and p.absent is not None:
                hyper[p.name] = p.absent
        for p in params:  # the ranges the command line is held to, before any shape is derived
            if hyper.get(p.name) is not None:
                p.check(hyper[p.name])
        check_saved_arrays(arrays, cls.saved_shapes(hyper))
        budget = load_budget()
        need = cls.build_bytes(hyper)
        if budget is not None and need > budget:
            raise ValueError(f"its hyper-parameters declare {need / 2**20:.0f} MiB of tables, far more than "
                             "the file holds (not a model streamlearn wrote)")
        return hyper

    @classmethod
    def from_state(cls, meta: dict, arrays: dict):
        hyper = cls.check_saved(meta, arrays)
        obj = cls(**hyper)
        obj.examples_learned = int(meta.get("examples_learned", 0))
        obj._load_extra_meta(meta)
        obj._load_arrays(arrays)
        return obj

    def override(self, **hyper) -> None:
        """Change non-structural hyper-parameters (when continuing from a saved model)."""
        params = {p.name: p for p in COMMON_PARAMS + self.PARAMS}
        for k, v in hyper.items():
            if v is None:
                continue
            if k not in params:
                raise ValueError(f"--algo {self.name} does not take option --{k}")
            params[k].check(v)
            if params[k].structural and v != self.hyper[k]:
                raise ValueError(f"--{k} {v} differs from the model's {self.hyper[k]}; "
                                 "it cannot change when continuing from a saved model")
            self.hyper[k] = v
        self._apply_hyper()

    def _apply_hyper(self) -> None:
        """Re-read non-structural hyper-parameters from ``self.hyper``."""

    @property
    def model_arrays_bytes(self) -> int:
        """Bytes of the arrays a model file holds, sized from :meth:`file_state`'s (arrays a learner gives
        without building them, e.g. the ``--oaa`` sketches' transposed form, are not built to be sized)."""
        return int(sum(a.nbytes for a in self.file_state()[1].values()))
