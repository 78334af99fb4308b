"""The memorisation statistics on CUDA give the CPU's numbers (skipped without CUDA)."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.memorization import flagging, nearest_neighbour_distances, nnaa

pytestmark = pytest.mark.gpu


def test_neighbours_flagging_and_nnaa_match_the_cpu() -> None:
    gen = np.random.default_rng(0)
    t, h, s = (gen.standard_normal((300, 64)) for _ in range(3))
    d_cpu, i_cpu = nearest_neighbour_distances(h, t)
    d_gpu, i_gpu = nearest_neighbour_distances(h, t, device="cuda")
    np.testing.assert_allclose(d_gpu, d_cpu, atol=1e-12)
    np.testing.assert_array_equal(i_gpu, i_cpu)
    a = flagging(t, h, s, n_permutations=499, rng=1)
    b = flagging(t, h, s, n_permutations=499, rng=1, device="cuda")
    np.testing.assert_array_equal(a.p_values, b.p_values)
    x = nnaa(t, h, s, n_bootstrap=100, rng=2)
    y = nnaa(t, h, s, n_bootstrap=100, rng=2, device="cuda")
    np.testing.assert_array_equal(x.bootstrap, y.bootstrap)


def test_privacy_check_on_cuda_gives_the_cpu_verdicts_under_its_own_cache(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`run_privacy_check(device="cuda")`: MTCNN, dlib's network (torch) and SSIM on the GPU.

    CUDA is not bitwise the CPU, so the runs keep apart in one cache (the device is part of
    every model's identity) and agree to float32 rounding: thresholds to 1e-4 (embedding
    differences of ~1e-6 through MTCNN boxes that may move by a fraction of a pixel), and the
    same verdicts on near-copies that sit far from that rounding.
    """
    import warnings
    from pathlib import Path

    import pandas as pd

    from idaudit.exceptions import IdauditWarning
    from idaudit.faces import FaceModelOptions, ShippedFaceGenerator
    from idaudit.pipeline import PrivacyStatistics, run_privacy_check
    from standins import save_faces

    dcgan = ShippedFaceGenerator()
    root = Path(tmp_path_factory.mktemp("privacy_cuda"))
    z = dcgan.sample_latents(30, rng=5)
    faces = dcgan.generate(z)
    near = dcgan.generate(z[:10] + 0.05 * np.random.default_rng(6).standard_normal((10, 100)))
    save_faces(root / "train" / "c", faces[:10])
    save_faces(root / "heldout" / "c", faces[10:20], 20)
    save_faces(root / "synthetic" / "c", np.concatenate([near[:5], faces[20:25]]), 40)
    cache = root / "cache"
    fast = PrivacyStatistics(n_bootstrap=50, n_permutations=199, nnaa_permutations=99)
    args = (root / "train", root / "heldout", root / "synthetic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # below the NNAA interval's minimum
        gpu, cpu = (
            run_privacy_check(
                *args,
                models=FaceModelOptions(dlib="torch", device=device),
                statistics=fast,
                cache=cache,
                progress=False,
            )
            for device in ("cuda", "cpu")
        )
    assert gpu.models.identity[0]["device"] == "cuda"
    assert cpu.cache_counters["embeddings_computed"] == gpu.cache_counters["embeddings_computed"]
    g, c = (r.flagging.reset_index(drop=True) for r in (gpu, cpu))
    assert g["metric"].tolist() == c["metric"].tolist()
    np.testing.assert_allclose(g["threshold"], c["threshold"], rtol=0, atol=1e-4)
    cols = ["n_synthetic_flagged", "n_heldout_flagged"]
    pd.testing.assert_frame_equal(g[cols], c[cols])
