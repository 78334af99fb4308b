"""The faces demo's headline numbers on its fixed seed (quick size): a change must be deliberate.

The pinned values were produced by ``run_face_demo(out, FACES_QUICK)`` (5 synthetic identities
× 10 DCGAN faces, MTCNN + dlib's ResNet in torch, paired mode). Rates are counts over 50 faces,
so they are pinned to one face; MMD-TV medians to 1e-3 (float32 embeddings, CPU thread counts).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.reproduce, pytest.mark.slow]

# condition -> (top-1 identification rate, MMD-TV median, ROC AUC median)
PINNED = {
    "none": (1.00, 0.9062, 1.0),
    "blur σ=3": (0.78, 0.9440, 1.0),
    "pixelate 8px": (0.24, 0.5158, 1.0),
    "swap mix=0.5": (0.62, 0.9170, 1.0),
}


def test_face_demo_headline_numbers_and_cache(tmp_path: Path) -> None:
    from idaudit.cli._demo_faces import FACES_QUICK, run_face_demo

    first = run_face_demo(tmp_path, FACES_QUICK, progress=False)
    table = first.table.set_index("condition")
    assert list(table.index) == list(PINNED)
    for name, (top1, mmdtv, auc) in PINNED.items():
        row = table.loc[name]
        assert row["top1_rate"] == pytest.approx(top1, abs=0.021), name  # one face of 50
        assert row["mmdtv_median"] == pytest.approx(mmdtv, abs=1e-3), name
        assert row["rocht_auc_median"] == pytest.approx(auc, abs=1e-3), name
    # blur and pixelation lower re-identification; the identities stay distinguishable
    assert table.loc["pixelate 8px", "top1_rate"] < table.loc["blur σ=3", "top1_rate"] < 1.0
    # a re-run is served from the cache: nothing is encoded, and the numbers are identical
    second = run_face_demo(tmp_path, FACES_QUICK, progress=False)
    assert second.n_encoded == 0
    assert first.n_encoded > 0
    assert second.table.equals(first.table)
