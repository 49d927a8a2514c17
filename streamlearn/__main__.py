"""``python -m streamlearn`` and the ``streamlearn`` console script (:func:`entry`)."""
import os
import signal


def _interrupted_at_start(signum, frame):
    """SIGINT, SIGTERM or SIGHUP before a command is running: nothing has been written, so end
    at once (exit 128 + signal, one line; no traceback from an import in progress)."""
    try:
        name = {signal.SIGTERM: " (SIGTERM)", getattr(signal, "SIGHUP", None): " (SIGHUP)"}.get(signum, "")
        os.write(2, f"streamlearn: interrupted{name}\n".encode())
    finally:
        os._exit(128 + signum)


_interrupted_at_start.streamlearn_startup = True  # cli.common.run_api replaces it with the command's


def entry():
    """Run the command line in a process it owns: a SIGINT (SIGTERM, SIGHUP) that lands while
    the modules are being imported or the options parsed ends it with exit 130 (143, 129) and
    one line (the command then installs its own handling, :func:`streamlearn.cli.common.run_api`).
    Signals the process inherited ignored (``nohup``, a background job's SIGINT) stay ignored."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
        if signal.getsignal(sig) is default:
            signal.signal(sig, _interrupted_at_start)
    # numpy's BLAS on one thread unless the user chose: OpenBLAS starts a pool of spinning threads
    # at import (~0.1 s of CPU per process), and a command's matrix products are small (model
    # saves, merges; the learners' kernels are numba's); children (dask workers) inherit it
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .signals import blocked

    with blocked():  # threads numpy's BLAS starts at import inherit the block (streamlearn.signals)
        from .cli import main
    main()


if __name__ == "__main__":
    entry()
