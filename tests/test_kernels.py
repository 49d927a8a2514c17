"""The kernel seam (streamlearn.kernels) and the reader configuration it is used through:
binding once per process, lazily, to C or numba with identical results; environment variables
read only by the CLI; ReaderConfig declares every field its readers read; -q validated once."""
from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_oracle as fo  # noqa: E402

from streamlearn import kernels  # noqa: E402
from streamlearn.errors import ConfigError  # noqa: E402
from streamlearn.io import ReaderConfig, read_batches  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SAMPLE = ROOT / "sample_data"
C_BUILT = kernels.backend() == "c"


def _modules_after(code: str, env=None) -> set:
    probe = code + ("\nimport sys\nprint('MODULES', ' '.join(sorted(m for m, v in sys.modules.items() "
                    "if v is not None and (m.split('.')[0] == 'numba' or m == 'streamlearn.kernels._cfast'))))\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=str(ROOT), env=env)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split("MODULES", 1)[1].split())


def test_importing_streamlearn_binds_nothing():
    mods = _modules_after("import streamlearn, streamlearn.io, streamlearn.api, streamlearn.cli, "
                          "streamlearn.algos, streamlearn.kernels as k, streamlearn.io.parquet\n"
                          "assert k._backend is None")
    assert not any(m.split(".")[0] == "numba" for m in mods), mods
    assert "streamlearn.kernels._cfast" not in mods


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["predict", "--help"]])
def test_help_does_not_import_numba(args):
    mods = _modules_after("import sys\nfrom streamlearn.cli import main\n"
                          f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n")
    assert not any(m.split(".")[0] == "numba" for m in mods), mods


def test_configure_rebinds_and_backend_reports_it():
    with fo.kernel_backend(False):
        assert kernels.backend() == "numba"
        assert kernels.adagrad_run.__doc__ == "``streamlearn.algos._adagrad_kernels.adagrad_run`` (numba)."
    with fo.kernel_backend(True):
        assert kernels.backend() == ("c" if C_BUILT else "numba")
    saved = (kernels._use_c, kernels._lib_path)
    try:
        kernels.configure(use_c=True, lib_path=str(ROOT / "no-such-library.so"))
        assert kernels.backend() == "numba"  # a library that does not load: numba, no error
    finally:
        kernels.configure(*saved)


@pytest.mark.skipif(not C_BUILT, reason="C fast path not built")
def test_the_library_reads_no_environment_variable(monkeypatch):
    monkeypatch.setenv("STREAMLEARN_NO_C", "1")
    with fo.kernel_backend(True):
        assert kernels.backend() == "c"


def test_the_cli_reads_the_environment(monkeypatch):
    from streamlearn.cli.common import configure_kernels, run_settings

    saved = (kernels._use_c, kernels._lib_path)
    try:
        monkeypatch.setenv("STREAMLEARN_NO_C", "1")
        configure_kernels()
        assert kernels.backend() == "numba"
        monkeypatch.setenv("STREAMLEARN_NO_C", "0")
        configure_kernels()
        assert kernels.backend() == ("c" if C_BUILT else "numba")
    finally:
        kernels.configure(*saved)
    for k in ("STREAMLEARN_PREFETCH", "STREAMLEARN_PARSE_THREADS", "STREAMLEARN_CHUNK_BYTES"):
        monkeypatch.delenv(k, raising=False)
    assert run_settings() == {}
    monkeypatch.setenv("STREAMLEARN_PREFETCH", "0")
    monkeypatch.setenv("STREAMLEARN_PARSE_THREADS", "3")
    monkeypatch.setenv("STREAMLEARN_CHUNK_BYTES", "4096")
    assert run_settings() == {"prefetch_depth": 0, "parse_threads": 3, "chunk_bytes": 4096}


def _same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for f in ("offsets", "indices", "values", "labels", "weights", "lines", "tag_start", "tag_end",
                  "name_start", "name_end", "ns_start", "ns_end", "text"):
            u, v = getattr(x, f), getattr(y, f)
            assert (u is None) == (v is None), f
            if u is not None:
                u, v = np.asarray(u), np.asarray(v)
                assert (u.dtype, u.shape, u.tobytes()) == (v.dtype, v.shape, v.tobytes()), f
        assert x.extra.get("errors") == y.extra.get("errors")


@pytest.mark.parametrize("path,kw", [
    (SAMPLE / "rcv1_small_200.vw.gz", {"quadratic": ("ab",), "keep_names": True, "chunk_bytes": 4096,
                                        "parse_threads": 2}),
    (SAMPLE / "a9a_test_1k.libsvm.gz", {"constant": False, "chunk_bytes": 8192}),
    (DATA / "pq_namespaces.parquet", {"quadratic": ("ab", "aa"), "keep_names": True}),
    (DATA / "pq_wide.parquet", {"label_column": "y", "keep_names": True, "parquet_batch_rows": 3}),
])
def test_readers_give_identical_batches_on_either_backend(path, kw):
    out = []
    for use_c in (True, False):
        with fo.kernel_backend(use_c):
            out.append(list(read_batches([str(path)], ReaderConfig(**kw))))
    assert out[0]
    _same_batches(*out)


@pytest.mark.skipif(not C_BUILT, reason="C fast path not built")
def test_a_c_bound_name_calls_numba_where_its_guard_refuses():
    data = np.frombuffer(b"abcdef", np.uint8)
    soff = np.array([0, 2, 6], np.int32)  # int32 offsets: not what the C port was written for
    from streamlearn.kernels import _cfast
    assert not _cfast.hash_string_part_args_ok(data, soff, 0, 2, np.uint64(7))
    with fo.kernel_backend(True):
        got = kernels.hash_string_part(data, soff, 0, 2, np.uint64(7))
    with fo.kernel_backend(False):
        want = kernels.hash_string_part(data, soff, 0, 2, np.uint64(7))
    assert got.tobytes() == want.tobytes()
    from streamlearn.io.hashing import hashstring
    assert got.tolist() == [hashstring(b"ab", 7), hashstring(b"cdef", 7)]


def test_string_hashing_of_the_seam_is_vw_hashing():
    from streamlearn.io import _hash_kernels as hk
    names = ["", " ", "a", "abc", "123", " 42 ", "é名", "4294967296"]
    for use_c in (True, False):
        with fo.kernel_backend(use_c):
            got = kernels.hash_strings(names, 77).tolist()
            assert [kernels.namespace_hash(n) for n in (None, "", " ", b" ")] == [0, 0, 0, 0]
            assert kernels.namespace_hash("ns") == kernels.namespace_hash(b"ns") != 0
        want = []
        for n in names:
            a = np.frombuffer(n.encode(), np.uint8)
            want.append(int(hk.hashstring(a, 0, len(a), np.uint64(77))))
        assert got == want


# -- ReaderConfig ------------------------------------------------------------------------------

def test_reader_config_rejects_unknown_fields():
    with pytest.raises(TypeError):
        ReaderConfig(parquet_rows=5)  # a misspelt field
    cfg = ReaderConfig()
    with pytest.raises(AttributeError):
        cfg.c_parser = True  # gone: the kernel seam decides
    cfg.label_column = "y"  # declared fields can be set
    assert cfg.label_column == "y"


def test_every_field_the_readers_read_is_declared():
    declared = {f.name for f in dataclasses.fields(ReaderConfig)} | {"inter"}
    read = set()
    for p in (ROOT / "streamlearn" / "io").glob("*.py"):
        src = p.read_text()
        assert not re.search(r"getattr\(\s*cfg\b", src), f"{p.name} reads a config field by getattr"
        read |= set(re.findall(r"\bcfg\.([a-z_]+)\b", src))
    assert read, "the readers read no field?"
    assert read <= declared, read - declared
    assert {"label_column", "parquet_batch_rows", "parse_threads", "strict", "keep_names"} <= read


def test_interactions_are_validated_once_in_the_config():
    with pytest.raises(ConfigError, match="exactly two namespace letters"):
        ReaderConfig(quadratic=("abc",))
    with pytest.raises(ConfigError, match="exactly three namespace letters"):
        ReaderConfig(cubic=("ab",))
    with pytest.raises(ConfigError, match="at least two namespace letters"):
        ReaderConfig(interactions=("a",))
    cfg = ReaderConfig(quadratic=("ba", "ab", "cc"))
    assert cfg.inter is cfg.inter  # computed once
    assert cfg.inter.inters == [b"ab", b"cc"]
    cfg.quadratic = ("aa",)
    assert cfg.inter.inters == [b"aa"]
    # the only maker of Interactions is the config (readers take cfg.inter)
    calls = [p.name for p in (ROOT / "streamlearn").rglob("*.py")
             for _ in re.finditer(r"(?<!class )\bInteractions\(", p.read_text())]
    assert calls == ["source.py"], calls


def test_kernels_import_nothing_above_them():
    """``kernels`` reaches the numba kernel modules of io/ and algos/ only by name (lazy)."""
    import ast
    for p in (ROOT / "streamlearn" / "kernels").glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = "." * node.level + (node.module or "")
                assert node.level <= 1 and not mod.startswith("streamlearn."), (p.name, mod)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("streamlearn") for a in node.names), p.name
