"""``python -m streamlearn`` and the ``streamlearn`` console script (:func:`entry`)."""
import os
import signal


def _interrupted_at_start(signum, frame):
    """SIGINT before a command is running: nothing has been written, so end at once, quietly
    (no traceback from an import in progress)."""
    try:
        os.write(2, b"streamlearn: interrupted\n")
    finally:
        os._exit(128 + signum)


_interrupted_at_start.streamlearn_startup = True  # cli.common.run_api hands SIGINT back to Python


def entry():
    """Run the command line in a process it owns: a SIGINT that lands while the modules are
    being imported or the options parsed ends it with exit 130 and one line (the command
    itself installs its own handling, :func:`streamlearn.cli.common.run_api`)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_at_start)
    from .cli import main

    main()


if __name__ == "__main__":
    entry()
