"""linkage_report against a plain NumPy recomputation on constructed embeddings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from idaudit.data import EmbeddingSet
from idaudit.pipeline import GeneratorEmbeddings, linkage_report


def _coded(vectors: np.ndarray, rows: list[tuple[Any, int, int]]) -> GeneratorEmbeddings:
    frame = pd.DataFrame(rows, columns=["identity", "source_index", "draw"])
    return GeneratorEmbeddings(
        embeddings=EmbeddingSet(vectors, frame["identity"].to_numpy()),
        vectors=vectors,
        rows=frame,
        outcomes=frame.assign(status="ok"),
        counts=pd.DataFrame(),
        excluded=(),
        attrs={},
        n_encoded=len(vectors),
    )


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_rates_match_a_plain_numpy_recomputation() -> None:
    gen = np.random.default_rng(5)
    n_ids, n_src, dim = 6, 5, 8
    centres = gen.normal(size=(n_ids, dim))
    rows = [(f"p{i}", j, j) for i in range(n_ids) for j in range(n_src)]
    ref = _unit(np.repeat(centres, n_src, axis=0) + gen.normal(0, 0.6, (n_ids * n_src, dim)))
    ano = _unit(ref + gen.normal(0, 0.5, ref.shape))
    rep = linkage_report(_coded(ref, rows), _coded(ano, rows), threshold=0.6)
    ident = np.repeat(np.arange(n_ids), n_src)
    src = np.tile(np.arange(n_src), n_ids)
    hits = 0
    for p in range(len(ano)):
        best, best_d = -1, np.inf
        for g in range(len(ref)):
            if ident[g] == ident[p] and src[g] == src[p]:
                continue
            d = float(np.sqrt(((ano[p] - ref[g]) ** 2).sum()))
            if d < best_d:
                best, best_d = g, d
        hits += int(ident[best] == ident[p])
    under = int((np.sqrt(((ano - ref) ** 2).sum(axis=1)) < 0.6).sum())
    assert rep.n_probes == rep.n_pairs == n_ids * n_src
    assert rep.top1_rate == pytest.approx(hits / 30)
    assert rep.match_rate == pytest.approx(under / 30)
    ci = stats.binomtest(under, 30).proportion_ci(0.95, method="exact")
    assert (rep.match_low, rep.match_high) == pytest.approx((ci.low, ci.high))
    # the construction exercises both outcomes
    assert 0 < under < 30
    assert hits > 0


def test_repeated_draws_of_one_source_are_one_trial() -> None:
    # sampling with replacement through a deterministic anonymiser: each source drawn 4 times
    # gives 4 identical rows, which are one observation, not four independent trials
    gen = np.random.default_rng(1)
    n_ids, n_src, reps, dim = 3, 3, 4, 6
    base = _unit(gen.normal(size=(n_ids * n_src, dim)))
    rows, ref, ano = [], [], []
    noise = _unit(base + gen.normal(0, 0.4, base.shape))
    for i in range(n_ids):
        for r in range(reps):
            for j in range(n_src):
                rows.append((f"p{i}", j, r * n_src + j))
                ref.append(base[i * n_src + j])
                ano.append(noise[i * n_src + j])
    rep = linkage_report(_coded(np.array(ref), rows), _coded(np.array(ano), rows))
    once = [(f"p{i}", j, j) for i in range(n_ids) for j in range(n_src)]
    single = linkage_report(_coded(base, once), _coded(noise, once))
    assert rep.n_pairs == single.n_pairs == n_ids * n_src
    assert rep.n_probes == single.n_probes
    assert (rep.match_low, rep.match_high) == (single.match_low, single.match_high)
    assert (rep.top1_low, rep.top1_high) == (single.top1_low, single.top1_high)


def test_confidence_level_sets_the_intervals_and_the_former_name_warns() -> None:
    gen = np.random.default_rng(2)
    rows = [(f"p{i}", j, j) for i in range(4) for j in range(6)]
    ref = _unit(np.repeat(gen.normal(size=(4, 5)), 6, axis=0) + gen.normal(0, 0.5, (24, 5)))
    ano = _unit(ref + gen.normal(0, 0.3, ref.shape))
    rep = linkage_report(_coded(ref, rows), _coded(ano, rows), confidence_level=0.8)
    k = round(rep.top1_rate * rep.n_probes)
    ci = stats.binomtest(k, rep.n_probes).proportion_ci(confidence_level=0.8, method="exact")
    assert (rep.top1_low, rep.top1_high) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert rep.confidence_level == 0.8
