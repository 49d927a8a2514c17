"""Writing outputs so that they never destroy what they point at: atomic temporaries renamed
over a file, in-place writes to what is not a regular file, and the plan of a run's outputs.

* :func:`resolve_output`: ``-`` is standard output; an existing FIFO, device or socket (through
  any symlinks), or an open file named under ``/dev`` or ``/proc`` (``/dev/stdout``), is written
  in place; anything else is replaced atomically, beside the real file when the name is a
  symlink (the link stays a link: replacing it would make ``-f link`` cut the link, and as root,
  ``-f /dev/stdout`` replaced by a regular file would capture every later process's output).
* :class:`AtomicFile` / :class:`atomic_writer`: a temporary ``.NAME.tmp-PID-XXXX`` beside the
  target, held under ``flock`` until it is renamed; the next writer removes a dead writer's
  temporary (its lock died with it), never a live one's, from any host or PID namespace.
* :class:`OutputPlan`: every output of a run checked before anything is read (same file as an
  input or another output: a usage error; a directory that takes no new file: an error naming
  the user's path), then staged and renamed together at the end.
"""
from __future__ import annotations

import fcntl
import os
import stat
import sys
import time

from ..errors import ConfigError, ModelFileError, OutputError

__all__ = ["resolve_output", "AtomicFile", "atomic_writer", "OutputPlan", "STALE_UNLOCKED_SECONDS"]


def _tmp_prefix(path: str) -> str:
    return "." + os.path.basename(path) + ".tmp-"


#: a temporary whose lock cannot be tested (a file system without ``flock``) is taken for a dead
#: writer's only when it is older than this
STALE_UNLOCKED_SECONDS = 24 * 3600


def _lock(fd: int) -> bool | None:
    """Try ``flock(LOCK_EX | LOCK_NB)`` on ``fd``: True when taken, False when another open
    file holds it (a live writer, in this process, another PID namespace or, over NFS, another
    host), None when the file system has no such locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return None


def _remove_stale_temporaries(path: str) -> None:
    """Remove temporaries a killed writer of ``path`` left behind (``.NAME.tmp-PID-XXXX``).

    A writer holds an exclusive ``flock`` on its temporary from creation to rename, and the
    kernel drops it when the writer dies (SIGKILL included), so a temporary whose lock can be
    taken has no live writer, whichever host or PID namespace wrote it; the PID in the name is
    only informative (a PID test would delete the live temporary of a writer in another
    container sharing the directory). Where the file system offers no locks, only a temporary
    older than :data:`STALE_UNLOCKED_SECONDS` is removed."""
    d = os.path.dirname(os.path.abspath(path))
    prefix = _tmp_prefix(path)
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        full = os.path.join(d, name)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            got = _lock(fd)
            if got is False or (got is None and time.time() - st.st_mtime < STALE_UNLOCKED_SECONDS):
                continue
            # still the file we locked (not one created under the same name since)
            if os.stat(full, follow_symlinks=False).st_ino == st.st_ino:
                os.unlink(full)
        except OSError:
            pass
        finally:
            os.close(fd)


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def _is_proc_link(path: str) -> bool:
    """``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``: names of an already open file,
    written through, never replaced."""
    a = os.path.abspath(path)
    return a.startswith(("/dev/", "/proc/"))


def resolve_output(path: str):
    """How an output named ``path`` is written: ``("stdout", None)`` for ``-``; ``("direct",
    path)`` when it names an existing file that is not a regular one (a FIFO, a device, a
    socket, through any symlinks) or an open file under ``/dev`` or ``/proc`` (``/dev/stdout``):
    such a target is opened and written in place, never replaced; else ``("atomic", real)``,
    ``real`` being the path with its symlinks resolved, beside which the temporary is made and
    over which it is renamed (the link itself stays a link)."""
    path = os.fspath(path)
    if path == "-":
        return "stdout", None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError:
        st = None
    if (st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)) \
            or _is_proc_link(path):
        return "direct", path
    return "atomic", os.path.realpath(path)


class AtomicFile:
    """A file that becomes ``path`` only when :meth:`commit` is called (after :meth:`finish`).

    The data go to ``.NAME.tmp-PID-XXXX`` in the directory of the real target (``path`` with
    its symlinks resolved: a link to a model is left a link and its target replaced), held
    under an exclusive ``flock`` until the rename. :meth:`finish` flushes, fsyncs and gives the
    file the permissions a plain ``open`` would (0666 & ~umask); :meth:`commit` renames it over
    the target (atomic on POSIX) and fsyncs the directory. :meth:`discard` removes it. A target
    that exists and is not a regular file (a FIFO, a device: :func:`resolve_output`) is
    written in place instead, and ``-`` is standard output: nothing is ever renamed over them.
    """

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self.kind, self.target = resolve_output(self.path)
        self.tmp = None
        self.f = None

    def open(self):
        if self.kind == "stdout":
            try:
                sys.stdout.flush()
            except (OSError, ValueError):
                pass
            self.f = open(sys.stdout.fileno(), "wb", closefd=False)
            return self.f
        if self.kind == "direct":
            self.f = open(self.path, "wb")
            return self.f
        _remove_stale_temporaries(self.target)
        d = os.path.dirname(self.target)
        import tempfile  # here: its imports (shutil, random) cost every run's start-up

        while True:
            fd, tmp = tempfile.mkstemp(prefix=f"{_tmp_prefix(self.target)}{os.getpid()}-", suffix="", dir=d)
            _lock(fd)
            try:  # a cleaner may have removed it between the creation and the lock: make another
                if os.stat(tmp, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        self.tmp = tmp
        self.f = os.fdopen(fd, "wb")
        return self.f

    def finish(self):
        """Make the data durable (still under the temporary's name)."""
        self.f.flush()
        if self.kind == "atomic":
            os.fsync(self.f.fileno())
            os.fchmod(self.f.fileno(), 0o666 & ~_umask())

    def commit(self):
        """Rename the finished temporary over the target (the lock is held until then)."""
        try:
            if self.kind == "atomic":
                os.replace(self.tmp, self.target)
                self.tmp = None
                _fsync_dir(os.path.dirname(self.target))
        finally:
            self._close()

    def _close(self):
        f, self.f = self.f, None
        if f is not None:
            try:
                f.close()
            except OSError:
                if self.kind == "atomic" and self.tmp is None:
                    raise

    def discard(self):
        """Remove the temporary (a direct target keeps what was written)."""
        try:
            self._close()
        except OSError:
            pass
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


class atomic_writer:
    """Context manager: a binary file object that becomes ``path`` only on success
    (:class:`AtomicFile`: opened, finished and committed on success, discarded on any
    exception). If the process is killed outright, ``path`` still holds the old file or the
    complete new one, never a mix, and the next writer of ``path`` removes the orphaned
    temporary (its lock died with its writer)."""

    def __init__(self, path: str):
        self.file = AtomicFile(path)

    @property
    def path(self):
        return self.file.path

    @property
    def tmp(self):
        return self.file.tmp

    def __enter__(self):
        return self.file.open()

    def __exit__(self, et, ev, tb):
        if et is not None:
            self.file.discard()
            return False
        try:
            self.file.finish()
            self.file.commit()
        except BaseException:
            self.file.discard()
            raise
        return False


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- the plan of a run's outputs ------------------------------------------------------------------

_BINARY_OUTPUTS = ("-f", "-o")


class _Out:
    def __init__(self, option, path, what):
        self.option, self.path, self.what = option, os.fspath(path), what
        self.kind, self.target = resolve_output(self.path)
        self.file = None  # the staged AtomicFile
        self.deferred = None  # a direct / stdout target's writer, run at commit


def _identity(path):
    """What makes two names the same file: ``(dev, ino)`` of an existing file (through
    symlinks), else the absolute path with symlinks resolved. ``None`` for a character device
    (``/dev/null`` can take several outputs) and for standard input/output."""
    if path == "-":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    if stat.S_ISCHR(st.st_mode):
        return None
    return ("inode", st.st_dev, st.st_ino)


class OutputPlan:
    """The outputs of one run: ``outputs`` is a list of ``(option, path, what)`` (``what``
    names the output in messages: "model file", "predictions", ...; ``path`` None: not asked).

    Construction checks, before anything is opened for writing, and raises
    :class:`~streamlearn.errors.ConfigError` (usage, exit 2) when an output is the same file as
    one of ``inputs`` (``(option, path)`` pairs; the pairs in ``may_share``, such as
    ``("-f", "-i")``, are allowed: that input is read whole before the output is written) or
    as another output, or when a binary output (``-f``, ``convert -o``) would share standard
    output with another one (``stdout_users``: options that print) or go to a terminal; and
    :class:`~streamlearn.errors.ModelFileError` / :class:`~streamlearn.errors.OutputError`
    (exit 1, naming the user's path) when a file cannot be created there (no such directory,
    not a directory, read-only, no permission), found by creating and removing a file in the
    directory. :meth:`stage` writes one output to its temporary (a direct target or stdout:
    kept for :meth:`commit`), :meth:`commit` renames them all, then writes the direct ones;
    :meth:`discard` removes the temporaries."""

    def __init__(self, outputs, inputs=(), may_share=(), stdout_users=()):
        self.outs = {}
        for option, path, what in outputs:
            if path is None:
                continue
            if str(path) == "":
                raise ConfigError(f"{option}: an empty file name")
            self.outs[option] = _Out(option, path, what)
        self._check_stdout(stdout_users)
        self._check_same_files(inputs, may_share)
        for o in self.outs.values():
            self._check_writable(o)

    def _error(self, o, reason):
        if o.option in ("-f",):
            return ModelFileError(f"{o.path}: cannot write model file: {reason}; nothing was written "
                                  "(an existing file is unchanged)")
        return OutputError(f"{o.path}: cannot write {o.what}: {reason}")

    def _check_stdout(self, stdout_users):
        to_stdout = [o.option for o in self.outs.values() if o.kind == "stdout"]
        users = to_stdout + [u for u in stdout_users if u not in to_stdout]
        for o in self.outs.values():
            if o.kind != "stdout" or o.option not in _BINARY_OUTPUTS:
                continue
            others = [u for u in users if u != o.option]
            if others:
                raise ConfigError(f"{o.option} - writes the binary {o.what} to standard output, and so would "
                                  f"{', '.join(others)}: give one of them a file")
            try:
                tty = os.isatty(sys.stdout.fileno())
            except (AttributeError, OSError, ValueError):
                tty = False
            if tty:
                raise ConfigError(f"{o.option} -: standard output is a terminal; redirect it (> FILE, | ...) "
                                  f"or give a file name for the {o.what}")

    def _check_same_files(self, inputs, may_share):
        ins = [(opt, p, _identity(p)) for opt, p in inputs if p is not None and p != "-"]
        seen = {}
        for o in self.outs.values():
            ident = _identity(o.path)
            if ident is None:
                continue
            for opt, p, iid in ins:
                if iid == ident and (o.option, opt) not in may_share:
                    src = f"the input {p}" if opt is None else f"{opt} {p}"
                    raise ConfigError(f"{o.option} {o.path} is the same file as {src}: writing it would destroy "
                                      "what is read; give another output file")
            if ident in seen:
                raise ConfigError(f"{o.option} {o.path} and {seen[ident].option} {seen[ident].path} are the same "
                                  "file: give each output its own")
            seen[ident] = o

    def _check_writable(self, o):
        if o.kind == "stdout":
            return
        if o.kind == "direct":
            if not os.access(o.path, os.W_OK):
                raise self._error(o, "permission denied")
            return
        target = o.target
        if os.path.isdir(target):
            raise self._error(o, "is a directory")
        d = os.path.dirname(target) or "."
        if not os.path.exists(d):
            raise self._error(o, f"no such directory {os.path.dirname(o.path) or d}")
        if not os.path.isdir(d):
            raise self._error(o, f"{os.path.dirname(o.path) or d} is not a directory")
        try:  # the only reliable test (read-only mounts, ACLs, root): make a file there
            import tempfile

            fd, probe = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".probe-", dir=d)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise self._error(o, e.strerror or str(e)) from None

    def __contains__(self, option):
        return option in self.outs

    def stage(self, option, write):
        """Write output ``option`` with ``write(f)`` (``f`` a binary file) to its temporary, made
        durable; a direct target or stdout is written at :meth:`commit`. Returns what ``write``
        returns (None when deferred). Errors name the user's path; the other staged outputs stay
        staged (a caller that gives up calls :meth:`discard`)."""
        o = self.outs[option]
        if o.kind != "atomic":
            o.deferred = write
            return None
        o.file = AtomicFile(o.path)
        try:
            f = o.file.open()
            out = write(f)
            o.file.finish()
        except OSError as e:
            o.file.discard()
            o.file = None
            raise self._error(o, e.strerror or str(e)) from None
        return out

    def commit(self):
        """Rename every staged temporary over its target, then write the direct outputs (a
        closed pipe on one of them stops only that one, except for ``-f``)."""
        try:
            for o in self.outs.values():
                if o.file is not None:
                    try:
                        o.file.commit()
                    except OSError as e:
                        raise self._error(o, e.strerror or str(e)) from None
                    o.file = None
            for o in self.outs.values():
                if o.deferred is not None:
                    write, o.deferred = o.deferred, None
                    self._write_direct(o, write)
        finally:
            self.discard()

    def _write_direct(self, o, write):
        af = AtomicFile(o.path)
        try:
            f = af.open()
            write(f)
            af.finish()
            af.commit()
        except BrokenPipeError:
            af.discard()
            if o.kind == "stdout":
                _silence_stdout()
            if o.option in _BINARY_OUTPUTS:
                raise self._error(o, "the reader closed the pipe") from None
        except OSError as e:
            af.discard()
            raise self._error(o, e.strerror or str(e)) from None
        except BaseException:
            af.discard()
            raise

    def discard(self):
        """Remove every staged temporary (nothing is renamed)."""
        for o in self.outs.values():
            if o.file is not None:
                o.file.discard()
                o.file = None
            o.deferred = None


def _silence_stdout():
    """After a closed pipe: point stdout at /dev/null so the exit stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
