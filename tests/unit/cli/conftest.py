"""Embedding files shared by the command-line tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def embedding_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Eight identities of 30 rows in 6 dimensions, as CSV (one unlabelled row) and NPZ."""
    gen = np.random.default_rng(0)
    k, n, d = 8, 30, 6
    x = np.repeat(gen.normal(size=(k, d)), n, axis=0) + 0.6 * gen.normal(size=(k * n, d))
    labels = np.repeat([f"p{i}" for i in range(k)], n)
    folder = tmp_path_factory.mktemp("emb")
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(d)])
    frame.insert(0, "identity", labels)
    # one row the reader must drop and count: a row without a label (a labelled row with a
    # NaN value is a failed output of its identity, kept by EmbeddingSet's failures="keep")
    frame.loc[3, "identity"] = np.nan
    frame.to_csv(folder / "emb.csv", index=False)
    np.savez(folder / "emb.npz", embeddings=x, labels=labels)
    return {"csv": folder / "emb.csv", "npz": folder / "emb.npz"}


@pytest.fixture(scope="module")
def uneven_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six identities of 30 rows, 'tiny' with 3 rows and 'small' with 6 (NPZ)."""
    gen = np.random.default_rng(3)
    counts = {**{f"p{i}": 30 for i in range(6)}, "tiny": 3, "small": 6}
    labels = np.concatenate([[k] * n for k, n in counts.items()])
    centres = gen.normal(size=(len(counts), 6))
    x = np.repeat(centres, list(counts.values()), axis=0) + 0.5 * gen.normal(size=(189, 6))
    path = tmp_path_factory.mktemp("uneven") / "uneven.npz"
    np.savez(path, embeddings=x, labels=labels)
    return path
