"""The privacy check's appearance-distance cache (idaudit.pipeline._privacy_cache)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from idaudit.pipeline import PrivacyCache

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")


def test_cache_files_change_with_the_metric_identity(tmp_path: Path) -> None:
    cache = PrivacyCache(tmp_path)
    a = cache.appearance_path({"metric": "lpips", "weights": {"f": "1"}})
    b = cache.appearance_path({"metric": "lpips", "weights": {"f": "2"}})
    assert a != b


class _Counting:
    """A toy metric on numbered images, ``|x - y|``, that records every pair it is asked."""

    def __init__(self, rows: list[str], cols: list[str]) -> None:
        self.rows, self.cols = rows, cols
        self.pairs: list[frozenset[str]] = []
        self.calls = 0

    def __call__(self, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        self.calls += 1
        a = [self.rows[i] for i in r]
        b = [self.cols[j] for j in c]
        self.pairs += [frozenset(p) for p in zip(a, b, strict=True)]
        return np.array([abs(float(x) - float(y)) for x, y in zip(a, b, strict=True)])


def _expected(rows: list[str], cols: list[str]) -> np.ndarray:
    return np.abs(np.array(rows, float)[:, None] - np.array(cols, float)[None, :])


def test_symmetric_request_computes_one_triangle_once(tmp_path: Path) -> None:
    cache = PrivacyCache(tmp_path)
    ident = {"kind": "appearance", "metric": "toy"}
    images = [str(k) for k in range(7)]
    metric = _Counting(images, images)
    got = cache.distances(ident, images, images, metric)
    np.testing.assert_array_equal(got, _expected(images, images))
    assert metric.calls == 1  # one list, not a block per row or column
    assert len(metric.pairs) == len(set(metric.pairs)) == 21  # 7 * 6 / 2, never a self-pair
    assert all(len(p) == 2 for p in metric.pairs)
    assert cache.counters["distances_computed"] == 21
    assert cache.counters["distances_reused"] == 0
    again = _Counting(images, images)
    np.testing.assert_array_equal(cache.distances(ident, images, images, again), got)
    assert again.calls == 0
    assert cache.counters["distances_computed"] == 21
    assert cache.counters["distances_reused"] == 21


def test_overlapping_request_computes_only_the_missing_pairs(tmp_path: Path) -> None:
    cache = PrivacyCache(tmp_path)
    ident = {"kind": "appearance", "metric": "toy"}
    rows, cols = ["0", "1", "2"], ["3", "4"]
    cache.distances(ident, rows, cols, _Counting(rows, cols))  # 6 pairs stored
    # a fresh cache object on the same folder: the pairs come from the file
    cache = PrivacyCache(tmp_path)
    rows2 = ["4", "1", "5", "5"]  # "5" is new and listed twice (a copy: distance 0)
    cols2 = ["0", "1", "3", "5"]
    metric = _Counting(rows2, cols2)
    got = cache.distances(ident, rows2, cols2, metric)
    np.testing.assert_array_equal(got, _expected(rows2, cols2))
    # distinct unordered pairs of the request: {4,0} {4,1} {4,3} {4,5} {1,0} {1,3} {1,5}
    # {5,0} {5,3} (nine; {5,1} is {1,5}, {1,1} and {5,5} are 0); stored before: {4,0} {4,1} {1,3}
    new = {frozenset(p) for p in [("4", "3"), ("4", "5"), ("1", "0"), ("1", "5"), ("5", "0"),
                                  ("5", "3")]}  # fmt: skip
    assert metric.calls == 1
    assert len(metric.pairs) == len(new)
    assert set(metric.pairs) == new
    assert cache.counters["distances_computed"] == 6
    assert cache.counters["distances_reused"] == 3
