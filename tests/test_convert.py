"""``convert``: text -> Parquet keeps everything, and training on it equals training on the text."""
import numpy as np
import pyarrow.parquet as pq
import pytest

from streamlearn.api import RunConfig, train
from streamlearn.batch import concat_batches
from streamlearn.convert import ConvertConfig, convert
from streamlearn.errors import InputError
from streamlearn.io import ReaderConfig, read_batches

from conftest import DATA, SAMPLE


@pytest.mark.parametrize("name, hyper, quadratic", [
    ("news20_binary_300.vw.gz", {"loss_function": "logistic"}, ()),
    ("news20_binary_300.vw.gz", {"loss_function": "logistic", "normalized": True}, ("sb",)),
    ("a9a_train_3k.libsvm.gz", {"loss_function": "logistic"}, ()),
    ("rcv1_small_200.vw.gz", {}, ()),
])
def test_round_trip_same_progressive_loss(tmp_path, name, hyper, quadratic):
    out = tmp_path / "x.parquet"
    s = convert(ConvertConfig(inputs=[str(SAMPLE / name)], output=str(out), row_group_size=128))
    assert s["skipped_lines"] == 0 and s["row_groups"] >= 2
    a = train(RunConfig(data=[str(SAMPLE / name)], hyper=dict(hyper), quadratic=quadratic, quiet=True))
    b = train(RunConfig(data=[str(out)], hyper=dict(hyper), quadratic=quadratic, quiet=True))
    assert a["examples"] == b["examples"] == s["examples"]
    assert a["total_features"] == b["total_features"]
    assert a["average_loss"] == b["average_loss"]


def test_round_trip_keeps_labels_weights_tags_and_names(tmp_path):
    src = DATA / "pq_sparse.vw"
    text = tmp_path / "t.vw"
    text.write_text("1 2 'a|s x:2 y |t z:0.5\n'b| q\n-1 |s 7:3\n0.5 0.25 |t w\n")
    out = tmp_path / "t.parquet"
    convert(ConvertConfig(inputs=[str(text), str(src)], output=str(out)))
    cfg = ReaderConfig(keep_names=True)
    a = list(read_batches([str(text), str(src)], cfg))
    b = list(read_batches([str(out)], cfg))
    A, B = concat_batches(a), concat_batches(b)
    for f in ("offsets", "indices", "values", "labels", "weights"):
        np.testing.assert_array_equal(getattr(A, f), getattr(B, f))
    assert [t for x in a for t in x.tags()] == [t for x in b for t in x.tags()]
    assert ([x.feature_name(k) for x in a for k in range(x.nnz)]
            == [x.feature_name(k) for x in b for k in range(x.nnz)])
    t = pq.read_table(out)
    assert t.column_names == ["label", "weight", "tag", "indices", "values", "names", "namespaces"]
    assert t.column("names")[0].as_py() == ["x", "y", "z"]
    assert t.column("namespaces")[0].as_py() == ["s", "s", "t"]
    for name in ("indices", "values", "names", "namespaces"):  # declared not null (faster decode)
        f = t.schema.field(name)
        assert not f.nullable and not f.type.value_field.nullable, name
    assert t.schema.field("label").nullable  # an unlabeled example has a null label


def test_row_group_size(tmp_path):
    out = tmp_path / "a.parquet"
    convert(ConvertConfig(inputs=[str(SAMPLE / "a9a_train_3k.libsvm.gz")], output=str(out),
                          row_group_size=1000, names=False))
    md = pq.ParquetFile(out).metadata
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [1000, 1000, 1000]
    assert "names" not in pq.ParquetFile(out).schema_arrow.names


def test_bad_input_leaves_no_output_and_keeps_old_file(tmp_path):
    bad = tmp_path / "bad.vw"
    bad.write_text("1 | a\nnotanumber | b\n")
    out = tmp_path / "o.parquet"
    out.write_bytes(b"old")
    with pytest.raises(InputError, match="bad.vw:2"):
        convert(ConvertConfig(inputs=[str(bad)], output=str(out), strict=True))
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.vw", "o.parquet"]


def test_cli_convert_ok_and_errors(tmp_path, invoke_cli):
    out = tmp_path / "n.parquet"
    r = invoke_cli("convert", SAMPLE / "news20_binary_test_100.vw", "-o", out)
    assert r.exit_code == 0, r.output
    assert "100 examples" in r.output
    r = invoke_cli("convert", tmp_path / "missing.vw", "-o", out)
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [f"streamlearn: error: {tmp_path / 'missing.vw'}: no such file"]
    r = invoke_cli("convert", SAMPLE / "news20_binary_test_100.vw")
    assert r.exit_code == 2  # -o is required
