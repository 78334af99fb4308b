"""examples/memorization_demo.py at a small size: the memorising generator is caught, the
fresh one is not (real DCGAN samples, dlib, MTCNN; every socket refused)."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import pytest

pytestmark = [pytest.mark.faces, pytest.mark.slow]

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "memorization_demo.py"


def test_demo_flags_the_memorising_generator_only(tmp_path: Path) -> None:
    demo = runpy.run_path(str(EXAMPLE))  # the module's functions, without running main
    reports = demo["run"](n=12, out=tmp_path)
    memo = reports["memorising"]
    fresh = reports["fresh"]
    for name in ("fresh", "memorising"):
        assert {p.name for p in (tmp_path / name).iterdir()} >= {"report.md", "nnaa.png"}
    m_flag = memo.flagging[memo.flagging["metric"] == "dlib-resnet-v1-torch"]
    # near-copies: flagged far above p, and significantly so
    assert (m_flag["synthetic_pct"] > 3 * m_flag["percentile"]).all()
    assert (m_flag["ci_lower"] > m_flag["percentile"]).all()
    assert (m_flag["p_value"] < 0.01).all()
    m_nnaa = memo.nnaa.set_index("metric").loc["dlib-resnet-v1-torch"]
    # 12 images per set: below MIN_INTERVAL_SIZE (20), so no interval is reported (NaN);
    # the permutation p-value carries the verdict at this size
    assert math.isnan(m_nnaa["ci_lower"])
    # fresh samples are exchangeable with the held-out faces: consistent with rate <= p
    f_flag = fresh.flagging[fresh.flagging["metric"] == "dlib-resnet-v1-torch"]
    assert (f_flag["ci_lower"] <= f_flag["percentile"]).all()
    assert (f_flag["p_value"] > 0.05).all()
    # the training and held-out embeddings were computed once, for the first generator
    assert fresh.cache_counters["embeddings_computed"] == 36
    assert memo.cache_counters["embeddings_computed"] == 12
