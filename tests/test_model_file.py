import os

import numpy as np
import pytest

from streamlearn.errors import ModelFileError
from streamlearn.io.model_file import FORMAT_VERSION, read_model, write_model


def _arrays():
    rng = np.random.default_rng(0)
    w = np.zeros(5000, np.float32)
    w[rng.integers(0, 5000, 50)] = rng.standard_normal(50)
    w[7] = -0.0
    w[8] = np.nan
    return {"w": w, "dense": rng.standard_normal((3, 4)), "i": np.arange(10, dtype=np.int64),
            "u8": np.frombuffer(b"hello", np.uint8).copy(), "empty": np.zeros(0)}


def test_round_trip_is_bit_exact(tmp_path):
    p = tmp_path / "m.slm"
    arrs = _arrays()
    size = write_model(str(p), "adagrad", {"hyper": {"a": 1}}, arrs, {"quadratic": ["ab"]})
    assert size == os.path.getsize(p)
    header, back = read_model(str(p))
    assert header["algo"] == "adagrad" and header["format_version"] == FORMAT_VERSION
    assert header["meta"] == {"hyper": {"a": 1}} and header["reader"] == {"quadratic": ["ab"]}
    for k, a in arrs.items():
        assert back[k].dtype == a.dtype and back[k].shape == a.shape
        assert back[k].tobytes() == a.tobytes()
    # mostly-zero vectors are stored sparsely
    assert size < arrs["w"].nbytes / 4


def test_no_temporary_left_and_existing_model_kept_on_failure(tmp_path):
    p = tmp_path / "m.slm"
    write_model(str(p), "adagrad", {}, {"w": np.ones(3)}, {})
    before = p.read_bytes()
    with pytest.raises(TypeError):
        write_model(str(p), "adagrad", {}, {"w": np.array(["x"], dtype=object)}, {})
    assert p.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["m.slm"]


@pytest.mark.parametrize("damage,msg", [
    (lambda b: b[:-40], "truncated|corrupt"),
    (lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:], "corrupt"),
    (lambda b: b"PK\x03\x04" + b[4:], "not a streamlearn model"),
    (lambda b: b[:8] + (FORMAT_VERSION + 1).to_bytes(4, "little") + b[12:], "newer"),
    (lambda b: b[:8] + (FORMAT_VERSION - 1).to_bytes(4, "little") + b[12:],
     f"model file format {FORMAT_VERSION - 1} is no longer read; re-train"),
    (lambda b: b"", "not a streamlearn model"),
])
def test_damaged_files_give_one_clear_error(tmp_path, damage, msg):
    import re
    p = tmp_path / "m.slm"
    write_model(str(p), "adagrad", {}, _arrays(), {})
    p.write_bytes(damage(p.read_bytes()))
    with pytest.raises(ModelFileError) as e:
        read_model(str(p))
    assert re.search(msg, str(e.value)) and str(p) in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read"):
        read_model(str(tmp_path / "nope.slm"))


@pytest.mark.parametrize("fill", ["dense", "sparse", "small"])
def test_moved_axis_is_written_as_its_copy_block_by_block(tmp_path, fill):
    """A MovedAxis (the --oaa sketch kept (R, W, K), saved (K, R, W)) gives the file the moved copy gives,
    whether raw (written class by class) or sparse-encoded; -0.0 counts as a non-zero as in any array;
    all_finite sees a NaN in it."""
    from streamlearn.io.model_file import all_finite, encode_model
    from streamlearn.memory import MovedAxis

    rng = np.random.default_rng(3)
    base = np.zeros((3, 700, 5) if fill != "small" else (2, 3, 4))
    if fill == "sparse":
        base.reshape(-1)[rng.choice(base.size, 20, replace=False)] = rng.normal(size=20)
    else:
        base[...] = rng.normal(size=base.shape)
    base[1, 2, 3] = -0.0
    lazy = MovedAxis(base, 2)
    copy = np.ascontiguousarray(np.moveaxis(base, 2, 0))
    assert lazy.shape == copy.shape and np.array_equal(np.asarray(lazy), copy)
    assert [b.copy() for b in lazy.blocks()][-1].tolist() == copy[-1].tolist()
    files = []
    for arr in (lazy, copy):
        path = tmp_path / f"m{len(files)}.slm"
        with open(path, "wb") as f:
            encode_model("toy", {"x": 1}, {"sketch": arr, "other": np.arange(3)}, {}).write_to(f)
        files.append(path.read_bytes())
    assert files[0] == files[1]
    header, arrays = read_model(str(tmp_path / "m0.slm"))
    assert np.array_equal(arrays["sketch"], copy, equal_nan=True)
    assert [e["encoding"] for e in header["arrays"] if e["name"] == "sketch"] == [
        "sparse" if fill == "sparse" else "raw"]
    assert all_finite(lazy)
    base[0, 1, 1] = np.nan
    assert not all_finite(lazy)
