"""The Python API: ``train`` / ``predict`` over a :class:`RunConfig`, ``select``, ``convert``,
``load_model`` / ``save_model``, and the learner registry the command line is generated from.

Nothing here prints: progress rows, warnings and the summary go through the ``log``
callback (the CLI passes one that writes to stderr). Nothing here reads environment
variables: the CLI turns them into :class:`RunConfig` fields.

>>> from streamlearn.api import RunConfig, train
>>> summary = train(RunConfig(data=["sample_data/a9a_train_3k.libsvm.gz"],
...                           hyper={"loss_function": "logistic"}))  # doctest: +SKIP
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .algos import COMMON_PARAMS, LEARNERS, MULTICLASS_LOSSES, SOFTMAX_LEARNERS, get_learner_class
from .convert import ConvertConfig, convert
from .errors import ConfigError, InputError, ModelFileError, OutputError
from .evaluate import InterruptGuard, ProgressSchedule, run_stream
from .io.source import MAX_EXAMPLE_FEATURES, MAX_LINE_BYTES
from .outputs import OutputPlan, PredictionSink, metrics_text
from .report import settings_lines, summary_lines, table_header, table_row

__all__ = ["RunConfig", "train", "predict", "select", "convert", "warmup", "ConvertConfig", "load_model",
           "save_model", "make_learner", "LEARNERS", "COMMON_PARAMS"]


@dataclass
class RunConfig:
    """Everything a train / predict run needs (the CLI fills it from its options)."""

    data: list = field(default_factory=lambda: ["-"])
    fmt: str = "auto"
    algo: str | None = None  # None: the model's (with -i) or adagrad
    hyper: dict = field(default_factory=dict)  # learner hyper-parameters given explicitly
    quadratic: tuple = ()
    # VW's other reader flags (streamlearn.io.interactions), stored in the model like -q
    cubic: tuple = ()
    interactions: tuple = ()
    leave_duplicate_interactions: bool = False
    ignore: tuple = ()
    keep: tuple = ()
    ignore_linear: tuple = ()
    constant: bool = True
    unit_norm: bool = False  # scale each example to unit L2 norm (stored in the model)
    initial_model: str | None = None
    final_model: str | None = None
    predictions: str | None = None  # path, "-" for stdout, None for none
    raw_predictions: str | None = None  # -r: scores before clipping / --binary (path, "-", None)
    binary: bool = False  # VW's --binary: -1/+1 predictions, 0/1 loss (stored in the model)
    link: str = "identity"
    probabilities: bool = False  # multiclass: -p writes every class's probability (VW's --probabilities)
    test_only: bool = False
    passes: int = 1
    progress: str = "2.0"  # VW's -P: when the table's rows (and --history_file's) fall
    table: bool = True  # VW's progress table on the log (unless quiet, or a monitor shows progress)
    history_file: str | None = None  # --history_file: the table's rows as JSON lines (streamlearn.history)
    quiet: bool = False
    strict: bool = False
    metrics: str | None = None
    save_on_interrupt: bool = False
    select_out: str | None = None
    label_column: str | None = None
    chunk_bytes: int = 1 << 20  # 1 MiB: as fast as 4 MiB, half the RSS in flight (benchmarks/memory_stream.py)
    keep_names: bool | None = None
    # one batch waiting is enough to overlap: the parse workers' results queue behind it (2 more);
    # each slot is ~1-2 MB that a long stream eventually fills at once (peak RSS)
    prefetch_depth: int = 1  # batches read ahead on the reader thread (0: read on the caller's)
    parse_threads: int | None = None  # text parsing threads (None: the CPUs, at most 4)
    # VW's inspection outputs (streamlearn.audit)
    audit: bool = False  # audit lines on stdout
    invert_hash: str | None = None  # readable model with feature names
    readable_model: str | None = None
    # bounds on one line's memory (streamlearn.io.ReaderConfig): a longer line is an input error,
    # an example with more features (interactions included) a malformed line
    max_line_bytes: int = MAX_LINE_BYTES
    max_example_features: int = MAX_EXAMPLE_FEATURES


#: skipped-line warnings shown per kind of reason; the rest are counted (summary: skipped lines)
WARNINGS_PER_REASON = 10
_NUMBERS = re.compile(r"[-+]?\d+(\.\d+)?")


def make_learner(algo: str, hyper: dict):
    """The learner of ``--algo algo`` with ``hyper`` (``--oaa K``: the one-against-all
    reduction or the learner's own multiclass; :func:`streamlearn.algos.make_learner`)."""
    from .algos import make_learner as build

    try:
        cls = get_learner_class(algo)
        cls.check_options(hyper)
        return build(algo, hyper)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    except MemoryError:  # any learner's tables (-b, --oaa, sketch sizes) larger than memory
        given = " ".join(f"--{k} {v}" for k, v in sorted(hyper.items()) if k in _SIZE_OPTIONS)
        raise ConfigError(f"the --algo {algo} model ({given or 'default sizes'}) does not fit in this "
                          "machine's memory: give smaller sizes (-b, --sketch_bytes, --sketch_width, "
                          "--sketch_size, --top_k)") from None


#: the options that size a learner's tables (named in the out-of-memory usage error)
_SIZE_OPTIONS = ("bit_precision", "oaa", "sketch_bytes", "sketch_width", "sketch_rows", "sketch_size", "top_k")


def _encoded_model(path: str, learner, reader: dict, estimator: dict | None = None):
    """The model file of ``learner`` (:class:`~streamlearn.io.model_file.EncodedModel`);
    a NaN/inf state is a :class:`~streamlearn.errors.NumericError` naming ``path``."""
    from .errors import NumericError
    from .io.model_file import all_finite, encode_model

    meta, arrays = learner.file_state()
    bad = [k for k, a in arrays.items() if np.dtype(a.dtype).kind == "f" and not all_finite(a)]
    if bad:
        raise NumericError(f"{path}: not written: the {learner.name} model's {', '.join(bad)} hold NaN or inf "
                           "(its state degenerated); an existing file is unchanged")
    return encode_model(learner.name, meta, arrays, reader, estimator)


def save_model(path: str, learner, reader: dict, estimator: dict | None = None) -> int:
    """Write ``learner`` (and the reader's hashing settings; ``estimator``: the Python
    estimator's own settings) to ``path`` (atomically; ``-``: standard output); returns bytes."""
    from .io.model_file import write_encoded

    return write_encoded(path, _encoded_model(path, learner, reader, estimator))


def load_model(path: str, data: bytes | None = None):
    """Read a model file (``data``: its bytes, named ``path`` in messages); returns
    ``(learner, reader_settings, header)``."""
    from .algos import LEARNERS, learner_from_state
    from .algos.base import loading_model
    from .io.model_file import read_model

    header, arrays = read_model(path, sparse=True, data=data)
    algo = header.get("algo")
    if algo not in LEARNERS:
        raise ModelFileError(f"{path}: model uses algorithm {algo!r}, which this streamlearn "
                             f"({__version__}) does not have")
    reader = header.get("reader", {})
    _check_reader_settings(path, reader)
    size = sum(int(e["nbytes"]) for e in header["arrays"])  # the payload: what the file holds
    try:
        with loading_model(size):
            learner = learner_from_state(algo, header.get("meta"), arrays)
    except (KeyError, ValueError, TypeError, OverflowError) as e:
        raise ModelFileError(f"{path}: model state does not fit algorithm {algo!r} ({e})") from None
    except MemoryError:
        raise ModelFileError(f"{path}: the model's tables do not fit in this machine's memory") from None
    if learner.multiclass and reader.get("binary"):
        raise ModelFileError(f"{path}: model file header is malformed (--binary kept with a multiclass model)")
    return learner, reader, header


#: a model's reader settings: name -> type (lists are of strings)
_READER_TYPES = {"quadratic": list, "cubic": list, "interactions": list, "ignore": list, "keep": list,
                 "ignore_linear": list, "constant": bool, "unit_norm": bool, "binary": bool,
                 "leave_duplicate_interactions": bool}


def _check_reader_settings(path: str, reader) -> None:
    """:class:`ModelFileError` unless the model's reader settings are of their types and
    valid interactions (what a run would otherwise report as a usage error or a traceback)."""
    from .io import ReaderConfig

    def bad(why):
        return ModelFileError(f"{path}: model file header is malformed (reader settings: {why})")

    if not isinstance(reader, dict):
        raise bad("not an object")
    for k, v in reader.items():
        t = _READER_TYPES.get(k)
        if t is None:
            raise bad(f"unknown setting {k!r}")
        if not isinstance(v, t) or (t is list and not all(isinstance(x, str) and x for x in v)):
            raise bad(f"{k} = {v!r} is not " + ("a list of strings" if t is list else "true or false"))
    try:
        ReaderConfig(**{k: tuple(reader.get(k, ())) for k in ("quadratic",) + _NS_SETTINGS},
                     leave_duplicate_interactions=bool(reader.get("leave_duplicate_interactions")))
    except (ConfigError, ValueError) as e:
        raise bad(str(e)) from None


#: the reader's namespace settings a model stores besides -q (lists of strings)
_NS_SETTINGS = ("cubic", "interactions", "ignore", "keep", "ignore_linear")


def _reader_settings(cfg: RunConfig) -> dict:
    out = {"quadratic": list(cfg.quadratic), "constant": bool(cfg.constant),
           "unit_norm": bool(cfg.unit_norm)}
    for k in _NS_SETTINGS:
        if getattr(cfg, k):
            out[k] = list(getattr(cfg, k))
    if cfg.leave_duplicate_interactions:
        out["leave_duplicate_interactions"] = True
    if cfg.binary:
        out["binary"] = True  # an output setting, kept with the model as VW keeps --binary
    return out


def _output_plan(cfg: RunConfig, learn: bool) -> OutputPlan:
    """Every output of the run, checked before anything is read or written (:class:`OutputPlan`):
    none may be the same file as an input (``-f`` may be the ``-i`` model: it is read whole
    first) or as another output, and each must be creatable."""
    outs = [("-f", cfg.final_model if learn else None, "model file"),
            ("-p", cfg.predictions, "predictions"), ("-r", cfg.raw_predictions, "raw predictions"),
            ("--readable_model", cfg.readable_model, "readable model"),
            ("--invert_hash", cfg.invert_hash, "readable model"),
            ("--select_out", cfg.select_out, "selected features"), ("--metrics", cfg.metrics, "metrics"),
            ("--history_file", cfg.history_file, "history")]
    inputs = [(None, p) for p in cfg.data] + [("-i", cfg.initial_model)]
    return OutputPlan(outs, inputs, may_share={("-f", "-i")}, stdout_users=["--audit"] if cfg.audit else [])


def _rereadable(path: str):
    """None when ``path`` can be read again from its start (a file, a directory of Parquet
    files), else what it is (standard input, a FIFO, a device, a socket)."""
    import stat

    if path == "-":
        return "standard input"
    try:
        st = os.stat(path)
    except OSError:
        return None  # reported by _check_inputs
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    kind = ("a pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else "a terminal or device" if stat.S_ISCHR(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
    return kind


def _check_passes(cfg: RunConfig) -> None:
    """``--passes N`` reads every input N times: one that can be read only once (stdin, a FIFO,
    ``/dev/stdin`` on a pipe) is a usage error before anything is read. VW refuses more than one
    pass without its cache file (``-c``), and streamlearn has none (``convert`` to Parquet is
    its cache): copying an unbounded stream to disk unasked is not done either."""
    if cfg.passes < 1:
        raise ConfigError("--passes must be >= 1")
    if cfg.passes == 1:
        return
    for p in cfg.data:
        what = _rereadable(p)
        if what is not None:
            name = "-" if p == "-" else p
            raise ConfigError(f"--passes {cfg.passes} reads the input {cfg.passes} times, and {name} is {what}, "
                              "which can be read only once: save it to a file first (or 'streamlearn convert "
                              "- -o data.parquet', which is also faster to read) and train on that")


#: how many of a directory's files that are not read a warning names
SKIPPED_NAMED = 3


def _check_inputs(paths, log=None):
    """Every input exists and can be read; a directory holds ``.parquet`` files. ``log`` is told
    of a directory's other files, which are not read (a text shard dropped among Parquet files
    would otherwise be left out of training without a word)."""
    for p in paths:
        if p == "-":
            continue
        if not os.path.exists(p):
            raise InputError(f"{p}: no such file")
        if os.path.isdir(p):
            from .io.parquet import directory_files
            parquet, others = directory_files(p)
            if not parquet:
                raise InputError(f"{p}: is a directory (with no .parquet files)")
            if others and log is not None:
                named = ", ".join(os.path.relpath(f, p) for f in others[:SKIPPED_NAMED])
                more = f" and {len(others) - SKIPPED_NAMED} more" if len(others) > SKIPPED_NAMED else ""
                log(f"warning: {p}: {len(others)} file{'s' if len(others) > 1 else ''} not ending in .parquet "
                    f"{'are' if len(others) > 1 else 'is'} not read ({named}{more}); a directory gives its .parquet "
                    "files only: name text files on the command line, or 'streamlearn convert' them")
            continue
        if not os.access(p, os.R_OK):
            raise InputError(f"{p}: permission denied")


def _default_parse_threads(cfg: RunConfig) -> int:
    """Text parsing threads when not set: the CPUs, at most 4; one when every input is a
    regular file of at most a quarter chunk (gzip: a few chunks of text), as a pool would have
    little to share and costs its start-up (threads, ``concurrent.futures``: ~30 ms)."""
    try:
        small = all(p != "-" and os.path.isfile(p) and os.stat(p).st_size <= cfg.chunk_bytes // 4
                    for p in cfg.data)
    except OSError:
        small = False
    return 1 if small and cfg.data else min(4, os.cpu_count() or 1)


def _reader_config(cfg: RunConfig, reader: dict, keep_names: bool):
    """The run's :class:`~streamlearn.io.ReaderConfig` (built before any output is opened:
    it validates ``-q``, a :class:`ConfigError` then leaves nothing behind)."""
    from .io import ReaderConfig

    workers = cfg.parse_threads if cfg.parse_threads is not None else _default_parse_threads(cfg)
    return ReaderConfig(fmt=cfg.fmt, quadratic=tuple(reader.get("quadratic", ())),
                        **{k: tuple(reader.get(k, ())) for k in _NS_SETTINGS},
                        leave_duplicate_interactions=bool(reader.get("leave_duplicate_interactions")),
                        constant=bool(reader.get("constant", True)), keep_names=keep_names,
                        chunk_bytes=cfg.chunk_bytes, strict=cfg.strict, parse_threads=max(1, workers),
                        label_column=cfg.label_column, max_line_bytes=cfg.max_line_bytes,
                        max_example_features=cfg.max_example_features)


def _input_paths(cfg: RunConfig) -> list:
    """``cfg.data`` with directories expanded to their ``*.parquet`` files."""
    paths = []
    for p in cfg.data:
        if p != "-" and os.path.isdir(p):
            from .io.parquet import expand_paths
            paths.extend(expand_paths(p))
        else:
            paths.append(p)
    return paths


def _batches(cfg: RunConfig, rc, unit_norm: bool, paths=None):
    """The run's batches: ``cfg.passes`` passes over ``cfg.data`` (directories expand to
    their ``*.parquet`` files), read ahead on a background thread (bounded queue) while
    worker threads parse text chunks in parallel, so reading, decompression and parsing
    overlap learning (the parse and learn kernels release the GIL). ``cfg.prefetch_depth``,
    ``cfg.parse_threads`` and ``cfg.chunk_bytes`` set the queue depth, the parsing threads and
    the bytes of text per batch (results depend on none of them). Each batch is stamped with
    its pass (``extra["input_pass"]``) beside the reader's position (:mod:`streamlearn.io.position`)."""
    from .io import read_batches
    from .io.prefetch import prefetch
    from .memory import bounded

    if paths is None:
        paths = _input_paths(cfg)

    def passes():
        for k in range(cfg.passes):
            for b in read_batches(paths, rc):
                b.extra["input_pass"] = k
                yield b

    depth = cfg.prefetch_depth
    stream = bounded(prefetch(passes(), depth) if depth > 0 else passes())
    if unit_norm:
        from .batch import unit_norm_rows
        stream = map(unit_norm_rows, stream)
    yield from stream


def initial_learner(cfg: RunConfig):
    """The learner a training run starts from, and its reader settings: the model of ``-i``
    (with the command line's hyper-parameter overrides; -q, namespace settings and --unit_norm
    must equal the model's) or a new learner of ``--algo``. Shared by :func:`train` and the
    Dask engine."""
    if cfg.initial_model:
        learner, reader, _ = load_model(cfg.initial_model)
        if cfg.algo and cfg.algo != learner.name:
            raise ConfigError(f"--algo {cfg.algo} differs from the model's {learner.name}")
        try:
            learner.override(**cfg.hyper)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if cfg.quadratic and list(cfg.quadratic) != reader.get("quadratic", []):
            raise ConfigError("-q differs from the model's interactions " + repr(reader.get("quadratic")))
        for k in _NS_SETTINGS:
            if getattr(cfg, k) and list(getattr(cfg, k)) != reader.get(k, []):
                raise ConfigError(f"--{k} differs from the model's {reader.get(k, [])!r} (the model fixes it)")
        if cfg.unit_norm and not reader.get("unit_norm"):
            raise ConfigError("--unit_norm differs from the model's (trained without it)")
    else:
        learner = make_learner(cfg.algo or "adagrad", cfg.hyper)
        reader = _reader_settings(cfg)
    return learner, reader


def _run(cfg: RunConfig, learn: bool, log=None, monitor=None):
    log = log or (lambda line: None)
    _check_passes(cfg)
    _check_inputs(cfg.data, None if cfg.quiet else log)
    plan = _output_plan(cfg, learn)

    learner, reader = initial_learner(cfg)
    if cfg.probabilities:
        if not learner.multiclass:
            raise ConfigError("--probabilities is for multiclass runs (--oaa K)")
        if not hasattr(learner, "set_probabilities"):
            raise ConfigError(f"--probabilities is not available for --algo {learner.name} --oaa "
                              "(per-class probabilities: one-against-all learners, --loss_function "
                              "multiclass_logistic, bear and mission)")
        try:
            learner.set_probabilities(True)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    keep_names = cfg.keep_names if cfg.keep_names is not None else learner.wants_names
    keep_names = keep_names or cfg.audit or bool(cfg.invert_hash)
    if (cfg.invert_hash or cfg.readable_model) and not learner.per_hash_weights:
        which = ", ".join(n for n, c in LEARNERS.items() if c.per_hash_weights)
        if learner.multiclass and learner.native_multiclass:
            raise ConfigError(f"--invert_hash / --readable_model: the {learner.loss_name} learner of --algo "
                              f"{learner.name} --oaa has no weight per feature hash (one-against-all over "
                              f"{which} has)")
        raise ConfigError(f"--invert_hash / --readable_model: --algo {learner.name} has no weight per "
                          f"feature hash (learners that have: {which})")
    rc = _reader_config(cfg, reader, keep_names)
    binary = bool(cfg.binary or reader.get("binary"))
    if binary and cfg.initial_model and not reader.get("binary"):
        reader = dict(reader, binary=True)
    if learner.multiclass and (binary or cfg.raw_predictions):
        raise ConfigError(f"{'--binary' if binary else '-r/--raw_predictions'} is for scalar predictions; "
                          f"this --algo {learner.name} model predicts classes")
    inspect = _inspection(cfg, learner, rc)
    try:  # -P is checked under --quiet too, and before any output is opened
        schedule = ProgressSchedule(cfg.progress)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    history = None
    if cfg.history_file:
        from .history import HistoryRecorder, run_label
        given = _given_options(cfg, learner, reader)
        history = HistoryRecorder({"label": run_label(learner.name, given), "algo": learner.name,
                                   "loss_function": learner.loss_name, "options": given,
                                   "hyper": dict(learner.hyper), "data": list(cfg.data), "passes": cfg.passes,
                                   "test_only": bool(not learn or cfg.test_only), "version": __version__})
    paths = _input_paths(cfg)

    # the sinks open their files at the first prediction (a run that fails before leaves none)
    sink = raw_sink = on_predictions = None
    if cfg.predictions is not None:
        sink = PredictionSink(cfg.predictions, "identity" if binary else cfg.link, learner.multiclass)
        on_predictions = ((lambda batch, pred: sink(batch, pred, learner.last_probabilities))
                          if cfg.probabilities else sink)
    if cfg.raw_predictions is not None:
        raw_sink = PredictionSink(cfg.raw_predictions, "identity", False, what="raw predictions")

    header_done = [False]

    def emit_row(*row, **extra):
        if history is not None:
            history.row(*row, **extra)
        if not table:
            return
        if not header_done[0]:
            for h in table_header():
                log(h)
            header_done[0] = True
        log(table_row(*row, multiclass=learner.multiclass))

    warned = Counter()  # shown warnings per kind of reason (numbers in it do not count)

    def on_errors(errs):
        if not cfg.quiet:
            for src, line, reason in errs:
                kind = _NUMBERS.sub("N", reason)
                warned[kind] += 1
                if warned[kind] <= WARNINGS_PER_REASON:
                    log(f"warning: {src}:{line}: {reason}; line skipped")

    if not cfg.quiet:
        for line in settings_lines(cfg, learner, reader, learn):
            log(line)
        if learner.compiles_on_first_use():
            log(f"compiling the {learner.name} kernels: first run only, cached afterwards "
                "(streamlearn warmup compiles them ahead of time)...")
    def on_exploded(n, avg, limit):
        if not cfg.quiet:
            fix = ("a smaller --learning_rate" if reader.get("unit_norm") else
                   "--unit_norm (each example scaled to unit length), or a smaller --learning_rate")
            log(f"warning: the progressive loss exploded: average {avg:.3g} over the first {n} labeled "
                f"examples, more than {limit:.3g} (100 times that of predicting 0); the feature values "
                f"may be too large for the {learner.name} steps: try {fix}")

    shown = False  # progress shown by the monitor (a bar) instead of the table
    if monitor is not None and not cfg.quiet:
        from .io.position import Extents
        extents = Extents(paths, cfg.passes)
        shown = bool(monitor.start(extents.total, extents.unit))
    on_batch = None
    if shown:
        def on_batch(ev, batch):
            stamp = batch.extra.get("input_pos") if batch.extra else None
            pos = extents.position(stamp, batch.extra.get("input_pass", 0)) if stamp is not None else None
            monitor.update(ev, pos)
    table = cfg.table and not cfg.quiet and not shown
    if not (table or history):
        schedule = None
    failed = True
    try:
        with InterruptGuard() as guard:
            try:
                stream, on_predictions = _inspected(_batches(cfg, rc, bool(reader.get("unit_norm")), paths),
                                                    on_predictions, inspect)
                ev = run_stream(learner, stream, learn=learn and not cfg.test_only,
                                schedule=schedule, emit_row=emit_row, on_batch=on_batch,
                                on_predictions=on_predictions, on_errors=on_errors, guard=guard, strict=cfg.strict,
                                binary=binary, on_raw=raw_sink, log_loss=_reports_log_loss(learner, cfg),
                                on_exploded=on_exploded)
            except KeyboardInterrupt:
                if cfg.save_on_interrupt and cfg.final_model and learn and not cfg.test_only:
                    # the guard raised between slices of a batch: the state is that of whole examples
                    learner.finish()
                    model = _encoded_model(cfg.final_model, learner, reader)
                    plan.stage("-f", model.write_to)
                    plan.commit()
                    log(f"interrupted: saved the model learned so far to {cfg.final_model} ({model.size} bytes)")
                raise
        failed = False
    finally:
        if shown:
            monitor.close(failed)
        # a closed reader of the predictions (| head) ends only the printing: the sinks never
        # raise for it, so the model and metrics below are still written
        try:
            for sk in (sink, raw_sink):
                if sk is not None:
                    sk.close(failed=failed)
        finally:
            if failed:
                plan.discard()
    summary = ev.summary(learner.loss)
    summary["algo"] = learner.name
    summary["learner"] = learner.extra_summary()
    summary["model_bytes"] = None
    try:
        _stage_outputs(plan, cfg, learner, reader, summary, inspect)
        if history is not None:
            plan.stage("--history_file", lambda f: history.write_to(f, summary))
        plan.commit()
    except BaseException:
        plan.discard()
        raise
    finally:
        if history is not None:
            history.close()
    if not cfg.quiet:
        hidden = sum(max(0, n - WARNINGS_PER_REASON) for n in warned.values())
        if hidden:
            log(f"warning: {hidden} more skipped lines not shown (the first {WARNINGS_PER_REASON} of each "
                "reason are)")
        for line in summary_lines(summary):
            log(line)
    return summary


def _given_options(cfg: RunConfig, learner, reader: dict) -> dict:
    """The options a run was given (learner hyper-parameters set explicitly, and reader flags),
    for a ``--history_file`` header and its label; a run continued from ``-i`` names its model."""
    out = {k: v for k, v in cfg.hyper.items() if v is not None}
    for k in ("quadratic",) + tuple(_NS_SETTINGS):
        if reader.get(k):
            out[k] = list(reader[k])
    if not reader.get("constant", True):
        out["noconstant"] = True
    for k in ("unit_norm", "binary"):
        if reader.get(k):
            out[k] = True
    if cfg.passes > 1:
        out["passes"] = cfg.passes
    if cfg.initial_model:
        out["initial_model"] = cfg.initial_model
    return out


def _stage_outputs(plan: OutputPlan, cfg: RunConfig, learner, reader: dict, summary: dict, inspect: dict):
    """Write the end-of-run outputs to their temporaries (the model, the readable models, the
    selection, then the metrics, which give the model's size); :meth:`OutputPlan.commit` then
    renames them together, so a failure in any leaves every existing file unchanged."""
    if cfg.final_model and "-f" in plan:
        model = _encoded_model(cfg.final_model, learner, reader)
        summary["model_bytes"] = model.size
        plan.stage("-f", model.write_to)
    summary["model_array_bytes"] = learner.model_arrays_bytes
    if cfg.readable_model or cfg.invert_hash:
        from .audit import write_readable_model
        for option, path, names in (("--readable_model", cfg.readable_model, None),
                                    ("--invert_hash", cfg.invert_hash, inspect.get("names"))):
            if path:
                plan.stage(option, lambda f, names=names: write_readable_model(
                    f, learner, reader, __version__, names.names if names is not None else None))
    if cfg.select_out:
        from .select import write_selection
        plan.stage("--select_out", lambda f: write_selection(learner, f))
    if cfg.metrics:
        plan.stage("--metrics", lambda f: f.write(metrics_text(summary).encode()))


def _inspection(cfg: RunConfig, learner, rc) -> dict:
    """The ``--audit`` / ``--invert_hash`` collectors of a run (:mod:`streamlearn.audit`)."""
    out = {}
    if cfg.audit or cfg.invert_hash:
        import sys

        from .audit import Auditor, FeatureNamer, HashNames
        namer = FeatureNamer(rc.inter, rc.constant)
        if cfg.audit:
            out["audit"] = Auditor(learner, namer, sys.stdout.write)
        if cfg.invert_hash:
            out["names"] = HashNames(namer, learner.name_mask)
    return out


def _inspected(stream, sink, inspect: dict):
    """``(batches, on_predictions)`` of a run with its inspection collectors."""
    calls = [c for c in (sink, inspect.get("audit") and inspect["audit"].on_predictions,
                         inspect.get("names") and inspect["names"].add) if c]
    if "audit" in inspect:
        stream = inspect["audit"].stream(stream)
    if len(calls) <= 1:
        return stream, (calls[0] if calls else None)

    def on_predictions(batch, pred):
        for c in calls:
            c(batch, pred)
    return stream, on_predictions


def _reports_log_loss(learner, cfg: RunConfig) -> bool:
    """Whether a multiclass run reports its cross-entropy (``average multiclass log loss``):
    a softmax learner always, one-against-all with ``--probabilities`` (as VW)."""
    return bool(learner.multiclass and (learner.native_multiclass or cfg.probabilities))


def train(cfg: RunConfig, log=None, monitor=None) -> dict:
    """One progressive-validation pass (``cfg.passes`` passes) over ``cfg.data``; returns the summary.

    ``monitor`` (optional) shows progress instead of the table: ``monitor.start(total, unit)``
    is called before the first batch with the inputs' size (None when unknown; ``unit``
    ``"bytes"`` or ``"rows"``, :class:`streamlearn.io.position.Extents`) and returns whether it
    shows progress (then the table is not logged); then ``monitor.update(evaluation, position)``
    after every batch (the running :class:`~streamlearn.evaluate.Evaluation`; ``position`` in
    ``unit``, or None) and ``monitor.close(failed)`` at the end of the stream, before the summary."""
    return _run(cfg, learn=True, log=log, monitor=monitor)


def predict(cfg: RunConfig, log=None, monitor=None) -> dict:
    """Test-only run of ``cfg.initial_model`` over ``cfg.data`` (no updates); ``monitor`` as :func:`train`."""
    if not cfg.initial_model:
        raise ConfigError("predict needs a model: -i MODEL")
    cfg.test_only = True
    return _run(cfg, learn=False, log=log, monitor=monitor)


def select(model: str, top_k: int | None = None, fmt: str = "tsv", out: str = "-") -> int:
    """Write the features selected by the BEAR / MISSION model file ``model`` to ``out``
    (``-``: stdout) as TSV or JSON (:mod:`streamlearn.select`); returns the number of rows."""
    from .select import write_selection

    plan = OutputPlan([("--output", out, "selected features")], [("-i", model)])
    learner, _, _ = load_model(model)
    try:
        if out == "-":
            return write_selection(learner, out, top_k=top_k, fmt=fmt)
        n = plan.stage("--output", lambda f: write_selection(learner, f, top_k=top_k, fmt=fmt))
        plan.commit()
        return n
    except UnicodeError as e:  # a ValueError, but never a usage error
        raise OutputError(f"{out}: cannot write the selected features: {e}") from None
    except ValueError as e:
        raise ConfigError(str(e)) from None
    finally:
        plan.discard()


def warmup(algos=None, log=None) -> dict:
    """Compile (and cache) the kernels of the learners ``algos`` (default: all) ahead of their
    first real run, for images and cron hosts: each is trained on a small generated VW text
    file with every loss it takes and with ``--oaa`` (and its softmax loss), its model is saved,
    loaded, used to predict (the first learner's also on LIBSVM and Parquet input, compiling those
    readers) and, for feature-selection learners, to select. Returns ``{algo: seconds}``."""
    import tempfile
    import time

    log = log or (lambda line: None)
    names = list(algos or LEARNERS)
    for a in names:
        get_learner_class(a)  # unknown names fail before any work
    out = {}
    with tempfile.TemporaryDirectory(prefix="streamlearn-warmup-") as d:
        data = {}
        for kind, label in (("binary", lambda i: 1 - 2 * (i % 2)), ("oaa", lambda i: 1 + i % 3)):
            data[kind] = os.path.join(d, f"{kind}.vw")
            with open(data[kind], "w") as f:
                f.writelines(f"{label(i)} {1 + i % 2}.5 'r{i} |a x{i % 7}:0.{i % 9 + 1} y |b z{i % 5}\n"
                             for i in range(64))
        # the readers' kernels: LIBSVM text and Parquet too (read once, by the first learner; they
        # hand every learner the same arrays, see kernels.kernel_array)
        data["libsvm"] = os.path.join(d, "binary.libsvm")
        with open(data["libsvm"], "w") as f:
            f.writelines(f"{1 - 2 * (i % 2)} {1 + i % 7}:0.{i % 9 + 1} 9:1\n" for i in range(64))
        data["parquet"] = os.path.join(d, "binary.parquet")
        convert(ConvertConfig(inputs=[data["binary"]], output=data["parquet"], quiet=True))
        readers = [data["libsvm"], data["parquet"]]
        for a in names:
            t0 = time.perf_counter()
            cls = LEARNERS[a]
            losses = next(p.type for p in COMMON_PARAMS if p.name == "loss_function")
            runs = [{"loss_function": loss} for loss in losses if loss in cls.losses and loss not in MULTICLASS_LOSSES]
            runs.append({"oaa": 3})  # every learner: its own multiclass or one-against-all
            if a in SOFTMAX_LEARNERS:
                runs += [{"oaa": 3, "loss_function": loss} for loss in MULTICLASS_LOSSES]
            for k, hyper in enumerate(runs):
                model = os.path.join(d, f"{k}.slm")
                src = [data["oaa" if "oaa" in hyper else "binary"]]
                train(RunConfig(data=src, algo=a, hyper=dict(hyper, bit_precision=12), quiet=True,
                                final_model=model))
                predict(RunConfig(data=src, initial_model=model, quiet=True))
                while readers and "oaa" not in hyper:
                    predict(RunConfig(data=[readers.pop()], initial_model=model, quiet=True))
                if cls.selects_features:
                    select(model, out=os.path.join(d, "sel.tsv"))
            out[a] = time.perf_counter() - t0
            log(f"{a}: ready ({out[a]:.1f} s)")
    return out
