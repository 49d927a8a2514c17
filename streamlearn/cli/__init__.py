"""The ``streamlearn`` command: a click group with one module per subcommand.

Commands are thin: they build an :class:`streamlearn.api.RunConfig`, call the API and map
library errors to exit codes (1: bad data / model file / I/O; 2: usage).
"""
from __future__ import annotations

import sys

import click

from .. import __version__

__all__ = ["main", "cli"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="streamlearn")
def cli():
    """streamlearn: one-pass streaming learning over VW text, LIBSVM and Parquet.

    \b
    Examples:
      zcat clicks.vw.gz | streamlearn train --algo oja-son -b 24 -f model.slm
      streamlearn predict -i model.slm test.vw -p preds.txt
      streamlearn train -i model.slm more.vw -f model2.slm

    Run 'streamlearn COMMAND --help' for a command's options, 'man streamlearn' for all.
    """


def _register():
    from .predict import predict
    from .train import train

    cli.add_command(train)
    cli.add_command(predict)
    try:
        from .select import select
    except ImportError:  # pragma: no cover - select lands with the BEAR issue
        pass
    else:
        cli.add_command(select)
    from .warmup import warmup

    cli.add_command(warmup)
    from .plot import plot

    cli.add_command(plot)
    from .merge import merge

    cli.add_command(merge)
    try:
        from .convert import convert
    except ImportError:  # pragma: no cover
        pass
    else:
        cli.add_command(convert)


_register()


def _hide_scipy():
    """Start-up: numba imports scipy.linalg (~0.25 CPU-s) during its first dispatch when
    scipy is installed, only to offer np.linalg in kernels; no streamlearn kernel uses it.
    The CLI process therefore marks scipy absent (``STREAMLEARN_ALLOW_SCIPY=1`` opts out).
    The Python API is left alone."""
    import os

    if "scipy" not in sys.modules and not os.environ.get("STREAMLEARN_ALLOW_SCIPY"):
        sys.modules["scipy"] = None


def _fast_exit(code) -> None:
    """End the process with ``code`` without CPython's teardown.

    Once a command has finished, everything it writes is closed (models, metrics and
    predictions files are written, fsync'ed and renamed or closed by then); what is left is
    the interpreter freeing every module and array one by one, 40-50 ms with numpy and
    pyarrow loaded (a tenth of a 200,000-example Parquet run). So the console script flushes
    stdout and stderr and leaves with ``os._exit``. ``STREAMLEARN_SLOW_EXIT=1`` keeps the
    normal exit (for coverage tools or atexit hooks of one's own)."""
    import os

    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    if os.environ.get("STREAMLEARN_SLOW_EXIT", "") not in ("", "0"):
        sys.exit(code)
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):  # a closed pipe (streamlearn predict ... | head)
            pass
    os._exit(code)


def main(argv=None):
    """Console-script entry point (with ``argv`` given, as from a test or another program,
    it raises ``SystemExit`` as click does instead of ending the process at once)."""
    _hide_scipy()
    code = 0
    try:
        cli.main(args=argv, prog_name="streamlearn", standalone_mode=True)
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        sys.stderr.write("streamlearn: interrupted\n")
        code = 130
    if argv is not None:
        sys.exit(code)
    _fast_exit(code)
