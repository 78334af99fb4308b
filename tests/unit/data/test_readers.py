import hashlib
from re import match as re_match

import numpy as np
import pandas as pd
import pytest
from sklearn.preprocessing import normalize as sk_normalize

from idaudit.data import EmbeddingSet
from idaudit.exceptions import IdauditWarning, InvalidInputError


@pytest.fixture
def table():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 4)).round(6)
    labels = ["n01"] * 3 + ["n02"] * 4 + ["n03"] * 2
    return x, labels


def _numeric_csv(path, x, labels, label_name="identity"):
    frame = pd.DataFrame(x, columns=[f"e{j}" for j in range(x.shape[1])])
    frame.insert(0, label_name, labels)
    frame.to_csv(path, index=False)


def test_numeric_csv_matches_arrays_and_hashes_file(tmp_path, table):
    x, labels = table
    path = tmp_path / "emb.csv"
    _numeric_csv(path, x, labels)
    es = EmbeddingSet.from_csv(path)
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15)
    assert es.labels.tolist() == labels
    assert es.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert es.source == str(path)
    assert "source='emb.csv'" in repr(es)


@pytest.mark.parametrize(
    "fmt",
    [
        lambda r: "[" + ", ".join(repr(float(v)) for v in r) + "]",  # str(list)
        lambda r: ",".join(repr(float(v)) for v in r),  # bare commas
        lambda r: " ".join(repr(float(v)) for v in r),  # spaces
        lambda r: np.array2string(r, max_line_width=20),  # numpy str, wrapped over lines
        lambda r: repr(r),  # "array([...])"
        lambda r: str(list(r)),  # "[np.float64(...), ...]" under NumPy 2
    ],
)
def test_text_vector_csv(tmp_path, table, fmt):
    x, labels = table
    path = tmp_path / "text.csv"
    pd.DataFrame({"label": labels, "vec": [fmt(r) for r in x]}).to_csv(path, index=False)
    es = EmbeddingSet.from_csv(path)
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15)


def test_label_column_detection(tmp_path, table):
    x, labels = table
    path = tmp_path / "a.csv"
    frame = pd.DataFrame(x, columns=list("abcd"))
    frame.insert(2, "id", labels)  # not the first column, found by name
    frame.to_csv(path, index=False)
    assert EmbeddingSet.from_csv(path).counts == {"n01": 3, "n02": 4, "n03": 2}
    # no known name: the first column holds the labels
    path2 = tmp_path / "b.csv"
    _numeric_csv(path2, x, labels, label_name="who")
    assert EmbeddingSet.from_csv(path2).identities.tolist() == ["n01", "n02", "n03"]
    # explicit
    assert EmbeddingSet.from_csv(path2, label_column="who").dim == 4


def test_vector_column_selects_columns(tmp_path, table):
    x, labels = table
    path = tmp_path / "two.csv"
    frame = pd.DataFrame(
        {
            "identity": labels,
            "original": [str(list(r)) for r in -x],
            "generated": [str(list(r)) for r in x],
            "file": [f"img{i}.png" for i in range(len(x))],
        }
    )
    frame.to_csv(path, index=False)
    es = EmbeddingSet.from_csv(path, vector_column="generated")
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15)
    path2 = tmp_path / "cols.csv"
    wide = pd.DataFrame(x, columns=list("abcd")).assign(identity=labels, note="x")
    wide.to_csv(path2, index=False)
    es2 = EmbeddingSet.from_csv(path2, vector_column=["b", "c"])
    np.testing.assert_allclose(es2.embeddings, sk_normalize(x[:, 1:3]), rtol=1e-15)
    # without vector_column, a column of text only is left out of the vectors, with a warning
    with pytest.warns(IdauditWarning, match=r"\['note'\] hold text, not numbers, and are left out"):
        es3 = EmbeddingSet.from_csv(path2)
    np.testing.assert_allclose(es3.embeddings, sk_normalize(x), rtol=1e-15)
    # a pattern and an inclusive range name the same columns as the list
    for spec in ("[bc]", "b:c"):
        es4 = EmbeddingSet.from_csv(path2, vector_column=spec)
        np.testing.assert_allclose(es4.embeddings, sk_normalize(x[:, 1:3]), rtol=1e-15)
    with pytest.raises(
        InvalidInputError, match=r"`vector_column` 'z\*' is not a column, a pattern"
    ):
        EmbeddingSet.from_csv(path2, vector_column="z*")
    with pytest.raises(InvalidInputError, match=r"`vector_column` range 'c:b' runs backwards"):
        EmbeddingSet.from_csv(path2, vector_column="c:b")  # a range runs forwards
    # patterns and ranges inside a list expand too; a column twice is refused
    es6 = EmbeddingSet.from_csv(path2, vector_column=["a:b", "[cd]"])
    np.testing.assert_allclose(es6.embeddings, sk_normalize(x), rtol=1e-15)
    with pytest.raises(InvalidInputError, match=r"names column\(s\) \['b'\] more than once"):
        EmbeddingSet.from_csv(path2, vector_column=["b", "a:c"])
    # a pattern that sweeps in a text column is refused by name, not as unparseable rows
    with pytest.raises(InvalidInputError, match=r"'\*' matched column\(s\) \['note'\] that hold"):
        EmbeddingSet.from_csv(path2, vector_column="*")
    # a column with some numbers keeps its place: its text cells make their rows unparseable
    mixed = pd.DataFrame(x, columns=list("abcd")).assign(identity=labels)
    mixed["d"] = mixed["d"].astype(object)
    mixed.loc[0, "d"] = "oops"
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    with pytest.warns(IdauditWarning, match="1 of .* rows failed"):
        es5 = EmbeddingSet.from_csv(tmp_path / "mixed.csv")
    assert es5.dim == 4
    assert es5.failure_reasons_["unparseable"] == 1


def test_csv_missing_and_unparseable_rows_are_counted(tmp_path):
    path = tmp_path / "holes.csv"
    path.write_text(
        "identity,e0,e1\n"
        "a,1,2\n"
        "a,,2\n"  # missing value
        ",1,2\n"  # missing label
        "b,oops,1\n"  # not a number in a numeric column
        "b,0,0\n"  # zero norm
        "b,3,4\n"
    )
    with pytest.warns(IdauditWarning, match="dropped 4 of 6 rows"):
        es = EmbeddingSet.from_csv(path, failures="drop")
    assert es.dropped_ == {"missing": 2, "unparseable": 1, "non_finite": 0, "zero_norm": 1}
    np.testing.assert_allclose(es.get("b"), [[0.6, 0.8]])
    # kept (the default): only the unlabelled row is dropped; the others are failed outputs
    with (
        pytest.warns(IdauditWarning, match=r"dropped 1 of 6 rows \(missing: 1\)"),
        pytest.warns(IdauditWarning, match=r"3 of 6 rows failed \(missing: 1, unparseable: 1"),
    ):
        kept = EmbeddingSet.from_csv(path)
    assert kept.dropped_ == {"missing": 1, "unparseable": 0, "non_finite": 0, "zero_norm": 0}
    assert kept.failed_counts == {"a": 1, "b": 2}
    assert kept.failure_codes("b").tolist() == ["unparseable", "zero_norm"]
    np.testing.assert_array_equal(kept.embeddings, es.embeddings)


def test_text_vectors_bad_rows_are_counted(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "identity,embedding\n"
        'a,"[1, 0, 0]"\n'
        'a,"[0, 1]"\n'  # wrong length
        'a,"[0, x, 1]"\n'  # unparseable token
        "a,\n"  # missing
        'b,"[0, 0, 1]"\n'
        'b,"[nan, 0, 1]"\n'  # NaN value: missing
        'b,"[inf, 0, 1]"\n'  # non-finite
    )
    with pytest.warns(IdauditWarning, match="dropped 5 of 7 rows"):
        es = EmbeddingSet.from_csv(path, failures="drop")
    assert es.dropped_ == {"missing": 2, "unparseable": 2, "non_finite": 1, "zero_norm": 0}
    assert es.counts == {"a": 1, "b": 1}
    with pytest.warns(IdauditWarning, match="5 of 7 rows failed"):
        kept = EmbeddingSet.from_csv(path)
    assert kept.counts == {"a": 1, "b": 1}
    assert kept.failure_codes("a").tolist() == ["unparseable", "unparseable", "missing"]
    assert kept.failure_codes("b").tolist() == ["missing", "non_finite"]
    assert kept.n_dropped_ == 0


@pytest.mark.parametrize("bad", ['"[0, 1]"', '"[1, 1, 1, 1]"'])
def test_text_vectors_of_the_wrong_length_are_unparseable(tmp_path, bad):
    path = tmp_path / "lengths.csv"
    rows = ['a,"[1, 0, 0]"', f"a,{bad}", 'b,"[0, 0, 1]"', 'b,"[2, 0, 0]"']
    path.write_text("identity,embedding\n" + "\n".join(rows) + "\n")
    # the file's common length is 3; a row of another length cannot be an embedding
    with pytest.warns(IdauditWarning, match=r"dropped 1 of 4 rows \(unparseable: 1\)"):
        es = EmbeddingSet.from_csv(path, failures="drop")
    assert es.counts == {"a": 1, "b": 2}
    with pytest.warns(IdauditWarning, match=r"1 of 4 rows failed \(unparseable: 1\)"):
        kept = EmbeddingSet.from_csv(path)
    assert kept.counts == {"a": 1, "b": 2}
    assert kept.failed_counts == {"a": 1, "b": 0}


def test_csv_labels_are_read_as_text(tmp_path):
    path = tmp_path / "ints.csv"
    path.write_text("label,x,y\n7,1,0\n7,0,1\n12,1,1\n")
    es = EmbeddingSet.from_csv(path)
    # CSV labels are always strings; a user who wants ints converts them
    assert es.identities.tolist() == ["12", "7"]


def test_csv_labels_with_leading_zeros_stay_distinct(tmp_path):
    path = tmp_path / "zeros.csv"
    path.write_text("label,x,y\n001,1,0\n1,0,1\n01,1,1\n001,2,1\n")
    es = EmbeddingSet.from_csv(path)
    assert es.counts == {"001": 2, "01": 1, "1": 1}


@pytest.mark.parametrize("spelling", ["NA", "None", "nan", "null", "N/A", "True", "False"])
def test_csv_na_like_labels_are_labels(tmp_path, spelling):
    path = tmp_path / "na.csv"
    path.write_text(f"label,x,y\n{spelling},1,0\n{spelling},0,1\nbob,1,1\n")
    es = EmbeddingSet.from_csv(path)  # no warning: nothing is dropped
    assert es.counts == {spelling: 2, "bob": 1}
    assert es.dropped_["missing"] == 0


def test_csv_na_in_numeric_columns_is_still_missing(tmp_path):
    path = tmp_path / "numna.csv"
    path.write_text("label,x,y\nNA,1,NA\nNA,0,1\nbob,nan,1\nbob,1,1\n")
    with pytest.warns(IdauditWarning, match=r"dropped 2 of 4 rows \(missing: 2"):
        es = EmbeddingSet.from_csv(path, failures="drop")
    assert es.counts == {"NA": 1, "bob": 1}
    with pytest.warns(IdauditWarning, match=r"2 of 4 rows failed \(missing: 2\)"):
        kept = EmbeddingSet.from_csv(path)
    assert kept.failed_counts == {"NA": 1, "bob": 1}


def test_csv_without_header_row_raises(tmp_path):
    path = tmp_path / "noheader.csv"
    path.write_text("a,0.1,0.2\na,0.3,0.4\nb,0.5,0.6\n")
    with pytest.raises(
        InvalidInputError,
        match=(
            r"seems to have no header row: every column name other than the label column "
            r"'a' parses as a number \(\['0\.1', '0\.2'\]\)"
        ),
    ):
        EmbeddingSet.from_csv(path)


def test_csv_header_only_has_no_data_rows(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("identity,e0,e1\n")
    with pytest.raises(InvalidInputError, match=r"'.*empty\.csv' has no data rows"):
        EmbeddingSet.from_csv(path)


def test_csv_errors(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("identity\na\n")
    with pytest.raises(InvalidInputError, match="a label column and at least one vector column"):
        EmbeddingSet.from_csv(path)
    path.write_text("identity,x\na,1\n")
    with pytest.raises(InvalidInputError, match=r"`label_column` names column\(s\) \['who'\]"):
        EmbeddingSet.from_csv(path, label_column="who")
    with pytest.raises(InvalidInputError, match=r"`vector_column` names column\(s\) \['v'\]"):
        EmbeddingSet.from_csv(path, vector_column="v")
    with pytest.raises(FileNotFoundError):
        EmbeddingSet.from_csv(tmp_path / "absent.csv")
    with pytest.raises(TypeError, match=r"`path` must be a str or os\.PathLike"):
        EmbeddingSet.from_csv(3)


def test_npz_reader(tmp_path, table):
    x, labels = table
    path = tmp_path / "emb.npz"
    np.savez(path, emb=x, ids=np.array(labels))
    es = EmbeddingSet.from_npz(path, embeddings_key="emb", labels_key="ids")
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15)
    assert es.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(InvalidInputError, match=r"`embeddings_key` 'embeddings' is not in"):
        EmbeddingSet.from_npz(path)


def test_npz_refuses_pickled_objects(tmp_path):
    path = tmp_path / "obj.npz"
    np.savez(path, embeddings=np.eye(2), labels=np.array(["a", 1], dtype=object))
    with pytest.raises(InvalidInputError, match="never unpickles"):
        EmbeddingSet.from_npz(path)


def _embed_like_npz(path):
    """An archive laid out as `idaudit embed` writes it (60 rows of 128 float32, ~32 kB)."""
    gen = np.random.default_rng(0)
    with open(path, "wb") as fh:
        np.savez(
            fh,
            embeddings=gen.normal(size=(60, 128)).astype(np.float32),
            labels=np.repeat([f"id{i}" for i in range(6)], 10),
            sources=np.array([f"id{i // 10}/{i}.jpg" for i in range(60)]),
            encoder=np.asarray("dlib"),
        )


def test_npz_damaged_inside_is_an_input_error_naming_the_file(tmp_path):
    path = tmp_path / "flipped.npz"
    _embed_like_npz(path)
    raw = bytearray(path.read_bytes())
    raw[2000:2400] = bytes(b ^ 0xFF for b in raw[2000:2400])  # inside embeddings.npy's data
    path.write_bytes(bytes(raw))
    expected = (
        r"'.*flipped\.npz' is a damaged \.npz archive \(Bad CRC-32 for file "
        r"'embeddings\.npy'\); write it again\.$"
    )
    for read in (EmbeddingSet.read, EmbeddingSet.from_npz):
        with pytest.raises(InvalidInputError, match=expected):
            read(path)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"label,e0\na,0.1\n", r"it holds text \(if it is a CSV file, give it the \.csv suffix\)"),
        (b"", "it is empty"),
        (b"\x00\xff\xfe\x80" * 64, "its first bytes are not a zip header"),
    ],
)
def test_npz_that_is_not_an_archive_says_what_it_is_not_never_pickle(tmp_path, content, said):
    path = tmp_path / "x.npz"
    path.write_bytes(content)
    with pytest.raises(InvalidInputError) as info:
        EmbeddingSet.read(path)
    message = str(info.value)
    assert re_match(
        r"'.*x\.npz' is not a \.npz archive \(the zip of \.npy arrays that numpy\.savez "
        rf"writes\): {said}\.$",
        message,
    )
    assert "pickle" not in message  # numpy's own message suggests allow_pickle=: never


def test_npy_file_named_npz_is_said_to_be_one_array(tmp_path):
    path = tmp_path / "one.npz"
    with open(path, "wb") as fh:
        np.save(fh, np.zeros((3, 4)))
    with pytest.raises(InvalidInputError, match=r"it is a single \.npy array \(numpy\.save\)"):
        EmbeddingSet.read(path)


def test_parquet_list_column(tmp_path, table):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    x, labels = table
    rows = [list(r) for r in x]
    rows[1] = None  # null list: missing
    rows[4] = rows[4][:3]  # short list: unparseable
    path = tmp_path / "emb.parquet"
    pq.write_table(
        pa.table({"identity": labels, "embedding": pa.array(rows, pa.list_(pa.float64()))}), path
    )
    with pytest.warns(IdauditWarning, match=r"missing: 1, unparseable: 1"):
        es = EmbeddingSet.from_parquet(path)
    keep = [0, 2, 3, 5, 6, 7, 8]
    np.testing.assert_allclose(es.embeddings, sk_normalize(x[keep]), rtol=1e-15)
    assert es.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_parquet_numeric_columns(tmp_path, table):
    pytest.importorskip("pyarrow")
    x, labels = table
    path = tmp_path / "wide.parquet"
    frame = pd.DataFrame(x, columns=[f"e{j}" for j in range(4)])
    frame.insert(0, "identity", labels)
    frame.to_parquet(path)
    es = EmbeddingSet.from_parquet(path)
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15)


def test_parquet_labels_keep_their_type_and_are_checked(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"identity": [7, 7, 12], "e0": [1.0, 2.0, 1.0]}), path)
    assert EmbeddingSet.from_parquet(path).identities.tolist() == [7, 12]
    path2 = tmp_path / "bools.parquet"
    pq.write_table(pa.table({"identity": [True, False, True], "e0": [1.0, 2.0, 1.0]}), path2)
    with pytest.raises(TypeError, match=r"`labels` must hold strings or integers; got dtype bool"):
        EmbeddingSet.from_parquet(path2)


def test_parquet_unreadable(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "junk.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(InvalidInputError, match="as Parquet"):
        EmbeddingSet.from_parquet(path)


def test_space_before_a_quoted_vector_parses(tmp_path):
    # `a, "[1, 2]"`: without skipinitialspace the quote is data and the row splits into more
    # fields than the header, which pandas used to turn into a shifted index
    path = tmp_path / "spaced.csv"
    path.write_text(
        'identity, embedding\na, "[1, 2, 3, 4]"\nb, "[3, 4, 5, 6]"\nb, "[3, 1, 5, 6]"\n'
    )
    es = EmbeddingSet.from_csv(path)
    assert es.counts == {"a": 1, "b": 2}
    np.testing.assert_allclose(es.get("b")[1], sk_normalize([[3.0, 1.0, 5.0, 6.0]])[0])


def test_rows_longer_than_the_header_are_refused(tmp_path, table):
    x, labels = table
    path = tmp_path / "short_header.csv"
    header = "identity," + ",".join(f"e{j}" for j in range(x.shape[1] - 1))  # one name missing
    rows = [f"{lab}," + ",".join(map(str, row)) for lab, row in zip(labels, x, strict=True)]
    path.write_text("\n".join([header, *rows]) + "\n")
    with pytest.raises(InvalidInputError, match="some rows hold more fields than the header"):
        EmbeddingSet.from_csv(path)


@pytest.mark.parametrize("label_name", ["identity", "person"])
def test_pandas_default_index_column_is_refused(tmp_path, table, label_name):
    x, labels = table
    frame = pd.DataFrame(x, columns=[f"e{j}" for j in range(x.shape[1])])
    frame.insert(0, label_name, labels)
    path = tmp_path / "with_index.csv"
    frame.to_csv(path)  # index=True: an unnamed first column 0..n-1
    with pytest.raises(InvalidInputError, match=r"\['Unnamed: 0'\] have no header name"):
        EmbeddingSet.from_csv(path)
    # naming the columns uses the file as it is
    es = EmbeddingSet.from_csv(
        path, label_column=label_name, vector_column=[f"e{j}" for j in range(x.shape[1])]
    )
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15)


def test_trailing_comma_column_is_refused(tmp_path, table):
    x, labels = table
    path = tmp_path / "trailing.csv"
    header = "identity," + ",".join(f"e{j}" for j in range(x.shape[1])) + ","
    rows = [f"{lab}," + ",".join(map(str, row)) + "," for lab, row in zip(labels, x, strict=True)]
    path.write_text("\n".join([header, *rows]) + "\n")
    with pytest.raises(InvalidInputError, match=r"\['Unnamed: 5'\] have no header name"):
        EmbeddingSet.from_csv(path)


def test_boolean_column_is_not_a_coordinate(tmp_path, table):
    x, labels = table
    frame = pd.DataFrame(x, columns=[f"e{j}" for j in range(x.shape[1])])
    frame.insert(0, "identity", labels)
    frame.insert(1, "is_real", [True, False] * 4 + [True])
    path = tmp_path / "flag.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(InvalidInputError, match=r"\['is_real'\] hold true/false values"):
        EmbeddingSet.from_csv(path)
    # named explicitly, a flag is read as 0 / 1
    es = EmbeddingSet.from_csv(path, vector_column=["is_real", "e0"], normalize=False)
    np.testing.assert_array_equal(es.embeddings[:, 0], [1, 0] * 4 + [1])


def test_parquet_integer_labels_with_a_null_stay_exact(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    big = 2**60
    ids = pa.array([big, big + 1, big + 1, None, big], type=pa.int64())
    x = np.random.default_rng(0).normal(size=(5, 3))
    table = pa.table({"identity": ids, **{f"e{j}": x[:, j] for j in range(3)}})
    path = tmp_path / "big_ids.parquet"
    pq.write_table(table, path)
    with pytest.warns(IdauditWarning, match="dropped 1 of 5 rows"):
        es = EmbeddingSet.from_parquet(path)
    # 2**60 and 2**60 + 1 collide as float64; they must stay two identities
    assert es.counts == {big: 2, big + 1: 2}
    assert es.n_dropped_ == 1


# ---------------------------------------------------------------------- failed outputs


def test_npz_outcomes_array_is_read_as_the_rows_outcomes(tmp_path):
    x = np.array([[1.0, 0.0], [np.nan, np.nan], [0.0, 1.0], [3.0, 4.0], [np.nan, np.nan]])
    labels = np.array(["a", "a", "b", "b", "b"])
    outcomes = np.array(["ok", "no_face", "ok", "unreadable", "bad_format"])
    path = tmp_path / "failed.npz"
    np.savez(path, embeddings=x, labels=labels, outcomes=outcomes)
    for read in (EmbeddingSet.from_npz, EmbeddingSet.read):
        with pytest.warns(IdauditWarning, match="3 of 5 rows failed"):
            es = read(path)
        assert es.counts == {"a": 1, "b": 1}
        assert es.failure_codes("a").tolist() == ["no_face"]
        # the finite vector of b's "unreadable" row is a failure: the outcome decides
        assert es.failure_codes("b").tolist() == ["unreadable", "bad_format"]
        assert es.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.warns(IdauditWarning, match=r"dropped 3 of 5 rows \(bad_format: 1, no_face: 1"):
        dropped = EmbeddingSet.from_npz(path, failures="drop")
    assert dropped.dropped_["unreadable"] == 1
    assert dropped.failed_counts == {"a": 0, "b": 0}


def test_npz_bad_outcomes_array_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "short.npz"
    np.savez(path, embeddings=np.eye(3), labels=np.array(["a", "a", "b"]), outcomes=["ok"])
    with pytest.raises(
        InvalidInputError, match=r"the 'outcomes' array of .*short.npz.*one entry per row"
    ):
        EmbeddingSet.from_npz(path)
    objects = tmp_path / "objects.npz"
    np.savez(
        objects,
        embeddings=np.eye(2),
        labels=np.array(["a", "b"]),
        outcomes=np.array(["ok", None], dtype=object),
    )
    with pytest.raises(InvalidInputError, match="never unpickles"):
        EmbeddingSet.from_npz(objects)


def test_readers_pass_failures_through(tmp_path):
    # an empty vector cell: b's second row fails as "missing"
    path = tmp_path / "holes.csv"
    path.write_text('identity,embedding\na,"[1, 0]"\nb,"[0, 1]"\nb,\na,"[1, 1]"\n')
    frame = pd.DataFrame({"identity": ["a", "b", "b", "a"], "e0": [1, 0, np.nan, 1]})
    frame["e1"] = [0, 1, 1, 1]
    frame.to_parquet(tmp_path / "holes.parquet", index=False)
    readers = [
        (EmbeddingSet.from_csv, path),
        (EmbeddingSet.read, path),
        (EmbeddingSet.from_parquet, tmp_path / "holes.parquet"),
        (EmbeddingSet.read, tmp_path / "holes.parquet"),
    ]
    for read, where in readers:
        with pytest.warns(IdauditWarning, match=r"1 of 4 rows failed \(missing: 1\)"):
            kept = read(where)
        assert kept.failures == "keep"
        assert kept.failed_counts == {"a": 0, "b": 1}
        assert kept.failure_codes("b").tolist() == ["missing"]
        assert kept.as_outputs().embeddings[2].tolist() == [0.0, 0.0, 1.0]
        with pytest.warns(IdauditWarning, match=r"dropped 1 of 4 rows \(missing: 1\)"):
            dropped = read(where, failures="drop")
        assert (dropped.failures, dropped.n_failed_, dropped.n_dropped_) == ("drop", 0, 1)
        np.testing.assert_array_equal(dropped.embeddings, kept.embeddings)
    with pytest.raises(InvalidInputError, match="`failures` must be one of 'keep', 'drop'"):
        EmbeddingSet.from_csv(path, failures="ignore")


def test_a_single_text_column_is_the_label_wherever_it_stands(tmp_path, table):
    # columns e0..e3 then `subject`: the text column holds the labels, said in a warning
    x, labels = table
    path = tmp_path / "last.csv"
    pd.DataFrame(x, columns=[f"e{j}" for j in range(4)]).assign(subject=labels).to_csv(
        path, index=False
    )
    expected = (
        r"no column of '.*last\.csv' is named label or identity or id; column 'subject', the "
        r"only one holding text, is taken as the identity labels \(name the label column with "
        r"`label_column` to choose another\)\."
    )
    with pytest.warns(IdauditWarning, match=expected):
        es = EmbeddingSet.from_csv(path)
    assert es.counts == {"n01": 3, "n02": 4, "n03": 2}
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15)
    # the same table as Parquet reads the same way
    pytest.importorskip("pyarrow")
    pq_path = tmp_path / "last.parquet"
    pd.read_csv(path).to_parquet(pq_path, index=False)
    with pytest.warns(IdauditWarning, match=r"column 'subject', the only one holding text"):
        assert EmbeddingSet.from_parquet(pq_path).counts == es.counts


def test_a_guessed_label_column_warning_points_at_the_callers_line(tmp_path, table):
    # the warning names the user's line for CSV and Parquet, through from_* and read alike
    x, labels = table
    frame = pd.DataFrame(x, columns=[f"e{j}" for j in range(4)]).assign(subject=labels)
    frame.to_csv(tmp_path / "t.csv", index=False)
    pytest.importorskip("pyarrow")
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    for name in ("t.csv", "t.parquet"):
        reader = EmbeddingSet.from_csv if name.endswith("csv") else EmbeddingSet.from_parquet
        for read in (reader, EmbeddingSet.read):
            with pytest.warns(IdauditWarning, match="the only one holding text") as record:
                read(tmp_path / name)
            assert [w.filename for w in record] == [__file__], (name, read)


def test_an_ambiguous_label_column_is_refused_naming_label_column(tmp_path, table):
    x, labels = table
    two = tmp_path / "two.csv"
    frame = pd.DataFrame(x, columns=[f"e{j}" for j in range(4)]).assign(
        subject=labels, file=[f"img{i}.png" for i in range(9)]
    )
    frame.to_csv(two, index=False)
    with pytest.raises(
        InvalidInputError,
        match=r"cannot tell which column of '.*two\.csv' holds the identity labels: none is "
        r"named label, identity, id, and 2 columns hold text \(\['subject', 'file'\]\); name "
        r"the label column with `label_column`\.$",
    ):
        EmbeddingSet.from_csv(two)
    assert EmbeddingSet.from_csv(two, label_column="subject", vector_column="e*").dim == 4
    # no text at all, and fractions in the first column: a coordinate, never the labels
    bare = tmp_path / "bare.csv"
    pd.DataFrame(x, columns=[f"e{j}" for j in range(4)]).to_csv(bare, index=False)
    with pytest.raises(
        InvalidInputError,
        match=r"none is named label, identity, id or holds text, and the first, 'e0', holds "
        r"fractions \(a coordinate, not an identity\); name the label column with "
        r"`label_column`\.$",
    ):
        EmbeddingSet.from_csv(bare)
    # integers in the first column may be identities too: a lone text column beside them
    # (a file name?) is ambiguous, not silently the labels
    mixed = tmp_path / "mixed.csv"
    pd.DataFrame(x, columns=[f"e{j}" for j in range(4)]).assign(
        subject=[1, 1, 1, 2, 2, 2, 2, 3, 3], file=[f"img{i}.png" for i in range(9)]
    )[["subject", "file", "e0", "e1", "e2", "e3"]].to_csv(mixed, index=False)
    with pytest.raises(
        InvalidInputError,
        match=r"none is named label, identity, id; 'file' is the only one holding text, but the "
        r"first, 'subject', holds integers, which may be identities too; name the label column "
        r"with `label_column`\.$",
    ):
        EmbeddingSet.from_csv(mixed)
    # a row index written by to_csv is never a label candidate: still refused by name
    indexed = tmp_path / "indexed.csv"
    pd.DataFrame(x, columns=[f"e{j}" for j in range(4)]).assign(who=[1, 1, 1, 2, 2, 2, 2, 3, 3])[
        ["who", "e0", "e1", "e2", "e3"]
    ].to_csv(indexed)
    with pytest.raises(InvalidInputError, match=r"\['Unnamed: 0'\] have no header name"):
        EmbeddingSet.from_csv(indexed)
    # integer identities in the first column stay the labels, as before
    ints = tmp_path / "ints.csv"
    pd.DataFrame(x, columns=[f"e{j}" for j in range(4)]).assign(who=[1, 1, 1, 2, 2, 2, 2, 3, 3])[
        ["who", "e0", "e1", "e2", "e3"]
    ].to_csv(ints, index=False)
    assert EmbeddingSet.from_csv(ints).counts == {"1": 3, "2": 4, "3": 2}


def test_integers_in_more_than_the_first_column_are_refused(tmp_path):
    # quantised embeddings with the identities last: every column holds integers, so taking
    # the first would read a coordinate as the identity and the identity as a coordinate
    gen = np.random.default_rng(1)
    quantised = pd.DataFrame(
        np.round(2 * gen.normal(size=(40, 4))).astype(int), columns=[f"e{j}" for j in range(4)]
    ).assign(person=np.repeat(np.arange(4), 10))
    path = tmp_path / "quant.csv"
    quantised.to_csv(path, index=False)
    with pytest.raises(
        InvalidInputError,
        match=r"none is named label, identity, id or holds text, and besides the first, 'e0', 4 "
        r"more hold integers \(\['e1', 'e2', 'e3', 'person'\]\), which may be identities too; "
        r"name the label column with `label_column`\.$",
    ):
        EmbeddingSet.from_csv(path)
    named = EmbeddingSet.from_csv(path, label_column="person", vector_column="e*")
    assert named.counts == {str(i): 10 for i in range(4)}


def test_npz_with_any_byte_flipped_reads_or_raises_an_input_error(tmp_path):
    # every byte of a small archive flipped, two ways: a damaged zip directory can announce an
    # unsupported version (NotImplementedError) or encryption (RuntimeError) from zipfile;
    # each must come back as an idaudit input error (one line in the CLI), never a traceback
    path = tmp_path / "small.npz"
    gen = np.random.default_rng(0)
    with open(path, "wb") as fh:
        np.savez(fh, embeddings=gen.normal(size=(4, 3)), labels=np.array(["a", "a", "b", "b"]))
    good = path.read_bytes()
    for offset in range(len(good)):
        for mask in (0xFF, 0x01):
            raw = bytearray(good)
            raw[offset] ^= mask
            path.write_bytes(bytes(raw))
            try:
                EmbeddingSet.read(path)
            except InvalidInputError:
                pass


def test_a_column_of_text_vectors_is_never_taken_for_the_labels(tmp_path, table):
    # `who` (text) and `vec` (text vectors): one label candidate, read without a warning when
    # it stands first, as before; a list column of a Parquet file is a vector column too
    x, labels = table
    path = tmp_path / "tv.csv"
    pd.DataFrame({"who": labels, "vec": [str(list(r)) for r in x]}).to_csv(path, index=False)
    es = EmbeddingSet.from_csv(path)
    assert es.counts == {"n01": 3, "n02": 4, "n03": 2}
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-12)
    pytest.importorskip("pyarrow")
    pq_path = tmp_path / "tv.parquet"
    pd.DataFrame({"vec": [list(r) for r in x], "who": labels}).to_parquet(pq_path)
    with pytest.warns(IdauditWarning, match=r"column 'who', the only one holding text"):
        assert EmbeddingSet.from_parquet(pq_path).counts == es.counts
