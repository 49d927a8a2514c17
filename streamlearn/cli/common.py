"""Running an API call from a command: stderr logging and error -> exit code mapping."""
from __future__ import annotations

import sys

import click

from ..errors import ConfigError, StreamlearnError

__all__ = ["run_api", "stderr_log"]


def stderr_log(line: str) -> None:
    sys.stderr.write(line + "\n")


def run_api(fn, cfg):
    # the CLI owns its process, so it tunes glibc's malloc for the reader pipeline (heap reuse
    # instead of fresh mmaps; see bound_malloc); a program calling the Python API keeps its own
    # malloc settings (the API still trims the heap every 32 batches)
    from ..io.prefetch import bound_malloc

    bound_malloc()
    try:
        return fn(cfg, log=stderr_log)
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    except StreamlearnError as e:
        sys.stderr.write(f"streamlearn: error: {e}\n")
        sys.exit(1)
    except KeyboardInterrupt as e:
        # SIGINT (exit 130) or SIGTERM (exit 143): nothing partial was written (models and
        # metrics are written atomically; predictions already written are kept)
        signum = getattr(e, "signum", 2)
        sys.stderr.write("streamlearn: interrupted" + (" (SIGTERM)" if signum == 15 else "") + "\n")
        sys.exit(128 + signum)
    except BrokenPipeError:
        from ..outputs import silence_stdout
        silence_stdout()
        sys.exit(0)
    except OSError as e:
        name = f"{e.filename}: " if getattr(e, "filename", None) else ""
        sys.stderr.write(f"streamlearn: error: {name}{e.strerror or e}\n")
        sys.exit(1)
