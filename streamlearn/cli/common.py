"""Running an API call from a command: the process settings read from the environment, stderr
logging and error -> exit code mapping."""
from __future__ import annotations

import os
import sys

import click

from ..errors import ConfigError, StreamlearnError

__all__ = ["run_api", "stderr_log", "configure_kernels", "run_settings"]

#: RunConfig field -> the environment variable that sets it (an integer)
_RUN_ENV = {"prefetch_depth": "STREAMLEARN_PREFETCH", "parse_threads": "STREAMLEARN_PARSE_THREADS",
            "chunk_bytes": "STREAMLEARN_CHUNK_BYTES"}


def configure_kernels() -> None:
    """Bind the kernel seam as the environment asks: ``STREAMLEARN_NO_C=1`` uses the numba
    kernels everywhere, ``STREAMLEARN_C_LIB`` names the C library to load (the library itself
    reads no environment variable)."""
    from .. import kernels

    kernels.configure(use_c=os.environ.get("STREAMLEARN_NO_C", "") in ("", "0"),
                      lib_path=os.environ.get("STREAMLEARN_C_LIB") or None)


def run_settings() -> dict:
    """The :class:`streamlearn.api.RunConfig` fields set in the environment:
    ``STREAMLEARN_PREFETCH`` (batches read ahead), ``STREAMLEARN_PARSE_THREADS`` (text parsing
    threads), ``STREAMLEARN_CHUNK_BYTES`` (bytes of text per batch)."""
    out = {}
    for name, env in _RUN_ENV.items():
        v = os.environ.get(env)
        if v:
            try:
                out[name] = int(v)
            except ValueError:
                raise click.UsageError(f"{env}={v!r}: expected an integer") from None
    return out


def stderr_log(line: str) -> None:
    sys.stderr.write(line + "\n")


def _own_signals() -> dict:
    """From here on the command answers SIGINT/SIGTERM/SIGHUP itself: each raises
    :class:`~streamlearn.evaluate.Interrupted` (exit 128 + signal, one line, outputs discarded),
    and the run's interrupt guard defers them while it learns. Replaces the default handlers
    and the console script's start-up ones (``streamlearn.__main__``: exit at once) only.
    Returns the handlers to restore."""
    import signal

    from ..evaluate import GUARDED_SIGNALS, raise_interrupted

    old = {}
    try:
        for sig in GUARDED_SIGNALS:
            h = signal.getsignal(sig)
            default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
            if h is default or getattr(h, "streamlearn_startup", False):
                old[sig] = h
                signal.signal(sig, raise_interrupted)
    except ValueError:  # not the main thread
        pass
    return old


def _restore_signals(old: dict) -> None:
    import signal

    for sig, h in old.items():
        signal.signal(sig, h)


def run_api(fn, cfg, monitor=None):
    """Run ``fn(cfg, log=...)`` (with ``monitor``: a progress display, :mod:`.progress`, whose
    ``log`` prints above it) and map library errors to exit codes."""
    # the CLI owns its process, so it tunes glibc's malloc for the reader pipeline (heap reuse
    # instead of fresh mmaps; see bound_malloc); a program calling the Python API keeps its own
    # malloc settings (the API still trims the heap every 32 batches)
    from ..memory import bound_malloc

    configure_kernels()
    bound_malloc()
    old_handlers = _own_signals()
    try:
        if monitor is None:
            return fn(cfg, log=stderr_log)
        return fn(cfg, log=monitor.log, monitor=monitor)
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    except StreamlearnError as e:
        sys.stderr.write(f"streamlearn: error: {e}\n")
        sys.exit(1)
    except KeyboardInterrupt as e:
        # SIGINT (exit 130), SIGTERM (143) or SIGHUP (129): nothing partial was written (models and
        # metrics are written atomically; predictions already written are kept)
        signum = getattr(e, "signum", 2)
        name = {15: " (SIGTERM)", 1: " (SIGHUP)"}.get(signum, "")
        sys.stderr.write(f"streamlearn: interrupted{name}\n")
        sys.exit(128 + signum)
    except BrokenPipeError:
        from ..outputs import silence_stdout
        silence_stdout()
        sys.exit(0)
    except OSError as e:
        name = f"{e.filename}: " if getattr(e, "filename", None) else ""
        sys.stderr.write(f"streamlearn: error: {name}{e.strerror or e}\n")
        sys.exit(1)
    finally:
        _restore_signals(old_handlers)
