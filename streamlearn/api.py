"""The Python API: ``train`` / ``predict`` over a config object, ``load_model`` / ``save_model``.

Nothing here prints: progress rows, warnings and the summary go through the ``log``
callback (the CLI passes one that writes to stderr).

>>> from streamlearn.api import RunConfig, train
>>> summary = train(RunConfig(data=["sample_data/a9a_small.libsvm"], hyper={"loss_function": "logistic"}))
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .algos import get_learner_class
from .errors import ConfigError, InputError, ModelFileError
from .evaluate import InterruptGuard, ProgressSchedule, run_stream

__all__ = ["RunConfig", "train", "predict", "load_model", "save_model", "make_learner"]


@dataclass
class RunConfig:
    """Everything a train / predict run needs (the CLI fills it from its options)."""

    data: list = field(default_factory=lambda: ["-"])
    fmt: str = "auto"
    algo: str | None = None  # None: the model's (with -i) or adagrad
    hyper: dict = field(default_factory=dict)  # learner hyper-parameters given explicitly
    quadratic: tuple = ()
    constant: bool = True
    unit_norm: bool = False  # scale each example to unit L2 norm (stored in the model)
    initial_model: str | None = None
    final_model: str | None = None
    predictions: str | None = None  # path, "-" for stdout, None for none
    link: str = "identity"
    test_only: bool = False
    passes: int = 1
    progress: str = "2.0"
    quiet: bool = False
    strict: bool = False
    metrics: str | None = None
    save_on_interrupt: bool = False
    select_out: str | None = None
    label_column: str | None = None
    chunk_bytes: int = 1 << 20  # 1 MiB: as fast as 4 MiB, half the RSS in flight (benchmarks/memory_stream.py)
    keep_names: bool | None = None


def make_learner(algo: str, hyper: dict):
    cls = get_learner_class(algo)
    try:
        cls.check_options(hyper)
        return cls(**hyper)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def save_model(path: str, learner, reader: dict) -> int:
    """Write ``learner`` (and the reader's hashing settings) to ``path``; returns bytes."""
    from .errors import NumericError
    from .io.model_file import all_finite, write_model

    meta, arrays = learner.state_dict()
    bad = [k for k, a in arrays.items() if np.asarray(a).dtype.kind == "f" and not all_finite(np.asarray(a))]
    if bad:
        raise NumericError(f"{path}: not written: the {learner.name} model's {', '.join(bad)} hold NaN or inf "
                           "(its state degenerated); an existing file is unchanged")
    return write_model(path, learner.name, meta, arrays, reader)


def load_model(path: str):
    """Read a model file; returns ``(learner, reader_settings, header)``."""
    from .algos import LEARNERS
    from .io.model_file import read_model

    header, arrays = read_model(path)
    algo = header.get("algo")
    if algo not in LEARNERS:
        raise ModelFileError(f"{path}: model uses algorithm {algo!r}, which this streamlearn "
                             f"({__version__}) does not have")
    try:
        learner = LEARNERS[algo].from_state(header["meta"], arrays)
    except (KeyError, ValueError, TypeError) as e:
        raise ModelFileError(f"{path}: model state does not fit algorithm {algo!r} ({e})") from None
    return learner, header.get("reader", {}), header


def _is_regular_file(path) -> bool:
    """Whether ``path`` itself (not a symlink's target) is a regular file."""
    import stat

    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


class _PredictionSink:
    """Writes predictions (``pred [tag]`` per line, as VW's ``-p``) as they are produced, so
    predictions already made survive a later input error. Stops quietly on a closed pipe."""

    def __init__(self, path, link, multiclass):
        self.path = path
        self.link = link
        self.multiclass = multiclass
        self.f = None
        self.broken = False
        self.count = 0

    def open(self):
        if self.path == "-":
            self.f = sys.stdout
        else:
            try:
                self.f = open(self.path, "w", buffering=1 << 20)
            except OSError as e:
                raise InputError(f"{self.path}: cannot write predictions: {e.strerror or e}") from None

    def __call__(self, batch, pred):
        if self.broken:
            return
        if self.multiclass:
            vals = [str(int(p)) for p in pred.tolist()]
        else:
            p = 1.0 / (1.0 + np.exp(-pred)) if self.link == "logistic" else pred
            vals = list(map("{:.9g}".format, p.tolist()))
        if batch.tag_start is not None and np.any(batch.tag_start >= 0):
            tags = batch.tags()
            vals = [v if t is None else f"{v} {t}" for v, t in zip(vals, tags)]
        try:
            self.f.write("\n".join(vals))
            self.f.write("\n")
            self.count += len(vals)
        except BrokenPipeError:
            self.broken = True
            _silence_stdout()

    def close(self, failed=False):
        """Flush and close; after a failed run that produced no prediction at all, remove
        the (empty) file so that no output is left behind. Predictions already written are
        always kept."""
        if self.f is None:
            return
        try:
            self.f.flush()
        except BrokenPipeError:
            self.broken = True
            _silence_stdout()
        if self.f is not sys.stdout:
            self.f.close()
            if failed and self.count == 0 and _is_regular_file(self.path):
                # only a regular file: -p /dev/stdout, a FIFO or a device is never removed
                # (as root, unlinking /dev/stdout would replace it for every later process)
                try:
                    os.unlink(self.path)
                except OSError:
                    pass


def _silence_stdout():
    """After a closed pipe (``| head``): point stdout at /dev/null so exit stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _reader_settings(cfg: RunConfig) -> dict:
    return {"quadratic": list(cfg.quadratic), "constant": bool(cfg.constant),
            "unit_norm": bool(cfg.unit_norm)}


def _check_inputs(paths):
    for p in paths:
        if p == "-":
            continue
        if not os.path.exists(p):
            raise InputError(f"{p}: no such file")
        if os.path.isdir(p):
            if not any(f.endswith(".parquet") for _, _, fs in os.walk(p) for f in fs):
                raise InputError(f"{p}: is a directory (with no .parquet files)")
            continue
        if not os.access(p, os.R_OK):
            raise InputError(f"{p}: permission denied")


def _batches(cfg: RunConfig, reader: dict, keep_names: bool):
    """The run's batches: ``cfg.passes`` passes over ``cfg.data`` (directories expand to
    their ``*.parquet`` files), read ahead on a background thread (bounded queue) while
    worker threads parse text chunks in parallel, so reading, decompression and parsing
    overlap learning (the numba parse and learn kernels release the GIL).

    Environment: ``STREAMLEARN_PREFETCH`` = queue depth in batches (default 1; 0: read on the main
    thread), ``STREAMLEARN_PARSE_THREADS`` = text parsing threads (default: CPUs, <= 4),
    ``STREAMLEARN_CHUNK_BYTES`` = bytes of text per batch (results do not depend on it).
    Text and Parquet go through the C fast path when it is available (``c_parser``; see
    :mod:`streamlearn._cfast`: bit-identical batches, so every learner uses it; an AdaGrad run
    then never imports numba)."""
    from .io import ReaderConfig
    from .io.prefetch import bounded, parallel_read_batches, prefetch

    rc = ReaderConfig(fmt=cfg.fmt, quadratic=tuple(reader.get("quadratic", ())),
                      constant=bool(reader.get("constant", True)), keep_names=keep_names,
                      chunk_bytes=int(os.environ.get("STREAMLEARN_CHUNK_BYTES") or cfg.chunk_bytes),
                      strict=cfg.strict, c_parser=True)
    if cfg.label_column is not None:
        rc.label_column = cfg.label_column
    paths = []
    for p in cfg.data:
        if p != "-" and os.path.isdir(p):
            from .io.parquet import expand_paths
            paths.extend(expand_paths(p))
        else:
            paths.append(p)
    workers = os.environ.get("STREAMLEARN_PARSE_THREADS")
    workers = int(workers) if workers else None

    def passes():
        for _ in range(cfg.passes):
            yield from parallel_read_batches(paths, rc, workers)

    # one batch waiting is enough to overlap: the parse workers' results queue behind it (2 more);
    # each slot is ~1-2 MB that a long stream eventually fills at once (peak RSS)
    depth = int(os.environ.get("STREAMLEARN_PREFETCH") or 1)
    stream = bounded(prefetch(passes(), depth) if depth > 0 else passes())
    if reader.get("unit_norm"):
        from .batch import unit_norm_rows
        stream = map(unit_norm_rows, stream)
    yield from stream


def _run(cfg: RunConfig, learn: bool, log=None):
    log = log or (lambda line: None)
    if cfg.passes < 1:
        raise ConfigError("--passes must be >= 1")
    if cfg.passes > 1 and "-" in cfg.data:
        raise ConfigError("--passes > 1 needs file inputs (standard input can be read only once)")
    _check_inputs(cfg.data)

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
        if cfg.unit_norm and not reader.get("unit_norm"):
            raise ConfigError("--unit_norm differs from the model's (trained without it)")
    else:
        learner = make_learner(cfg.algo or "adagrad", cfg.hyper)
        reader = _reader_settings(cfg)
    keep_names = cfg.keep_names if cfg.keep_names is not None else learner.wants_names

    sink = None
    if cfg.predictions is not None:
        sink = _PredictionSink(cfg.predictions, cfg.link, learner.multiclass)
        sink.open()

    schedule = None if cfg.quiet else ProgressSchedule(cfg.progress)
    header_done = [False]

    def emit_row(*row):
        from .report import table_header, table_row
        if not header_done[0]:
            for h in table_header():
                log(h)
            header_done[0] = True
        log(table_row(*row, multiclass=learner.multiclass))

    def on_errors(errs):
        if not cfg.quiet:
            for src, line, reason in errs:
                log(f"warning: {src}:{line}: {reason}; line skipped")

    if not cfg.quiet:
        for line in _settings_lines(cfg, learner, reader, learn):
            log(line)
    failed = True
    try:
        with InterruptGuard() as guard:
            try:
                ev = run_stream(learner, _batches(cfg, reader, keep_names), learn=learn and not cfg.test_only,
                                schedule=schedule, emit_row=emit_row,
                                on_predictions=sink, on_errors=on_errors, guard=guard, strict=cfg.strict)
            except KeyboardInterrupt:
                if cfg.save_on_interrupt and cfg.final_model and learn and not cfg.test_only:
                    # the guard raised between batches: the state is that of whole batches
                    learner.finish()
                    size = save_model(cfg.final_model, learner, reader)
                    log(f"interrupted: saved the model learned so far to {cfg.final_model} ({size} bytes)")
                raise
        failed = False
    finally:
        if sink is not None:
            sink.close(failed=failed)
    summary = ev.summary(learner.loss)
    summary["algo"] = learner.name
    summary["learner"] = learner.extra_summary()
    summary["model_bytes"] = None
    if cfg.final_model:
        summary["model_bytes"] = save_model(cfg.final_model, learner, reader)
    summary["model_array_bytes"] = learner.model_arrays_bytes
    if cfg.select_out:
        from .select import write_selection
        write_selection(learner, cfg.select_out)
    if cfg.metrics == "-":
        sys.stdout.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    elif cfg.metrics:
        from .io.model_file import atomic_writer
        with atomic_writer(cfg.metrics) as f:
            f.write(json.dumps(summary, indent=2, sort_keys=True).encode() + b"\n")
    if not cfg.quiet:
        from .report import summary_lines
        for line in summary_lines(summary):
            log(line)
    return summary


def _settings_lines(cfg, learner, reader, learn):
    lines = [f"algorithm = {learner.name}", f"Num weight bits = {learner.bits}"]
    for k, v in learner.hyper.items():
        if k == "loss_function":
            v = learner.loss_name
        if k != "bit_precision" and v is not None:
            lines.append(f"{k} = {v}")
    if reader.get("quadratic"):
        lines.append("quadratic = " + " ".join(reader["quadratic"]))
    if reader.get("unit_norm"):
        lines.append("unit_norm = True")
    if cfg.initial_model:
        lines.append(f"initial model = {cfg.initial_model}")
    if cfg.final_model:
        lines.append(f"final model = {cfg.final_model}")
    if cfg.predictions:
        lines.append(f"predictions = {cfg.predictions}")
    if not learn or cfg.test_only:
        lines.append("only testing")
    lines.append("data = " + " ".join("<stdin>" if d == "-" else d for d in cfg.data))
    return lines


def train(cfg: RunConfig, log=None) -> dict:
    """One progressive-validation pass (``cfg.passes`` passes) over ``cfg.data``; returns the summary."""
    return _run(cfg, learn=True, log=log)


def predict(cfg: RunConfig, log=None) -> dict:
    """Test-only run of ``cfg.initial_model`` over ``cfg.data`` (no updates)."""
    if not cfg.initial_model:
        raise ConfigError("predict needs a model: -i MODEL")
    cfg.test_only = True
    return _run(cfg, learn=False, log=log)
