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

    Run 'streamlearn COMMAND --help' for a command's options, 'man man/streamlearn.1' for all.
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


def main(argv=None):
    """Console-script entry point."""
    _hide_scipy()
    try:
        cli.main(args=argv, prog_name="streamlearn", standalone_mode=True)
    except KeyboardInterrupt:
        sys.stderr.write("streamlearn: interrupted\n")
        sys.exit(130)
