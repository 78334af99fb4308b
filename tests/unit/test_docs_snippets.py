"""docs/pipeline.md's snippets run as written and give what the page says they give.

Its ```python blocks run in order in one namespace inside a temporary working directory (so
``cache="embeddings-cache/"`` lands there), with the reader's ``images_by_identity`` supplied
from the shipped DCGAN's synthetic identities, on one torch thread (MTCNN and dlib on a loaded
two-core machine).
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "docs" / "pipeline.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)

#: 4 identities (6 pairs; ``pairs=100`` audits all of them) x 10 images: enough rows for
#: ROC-HT's 5 folds, the certifier's development/test split and the split-half controls.
N_IDENTITIES, N_PER_IDENTITY = 4, 10


def test_pipeline_page_fences() -> None:
    langs = [lang for lang, _ in _FENCE.findall(PIPELINE.read_text(encoding="utf-8"))]
    # one runnable example, no shell or unrun blocks: a new one needs a test here
    assert langs == ["python"]


@pytest.mark.slow
def test_pipeline_audit_generator_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from idaudit.exceptions import IdauditWarning
    from idaudit.faces import synthetic_identities

    ids = synthetic_identities(N_IDENTITIES, N_PER_IDENTITY, rng=0)
    namespace = {
        "__name__": "__docs__",
        "images_by_identity": {
            f"id{k}": list(ids.images[ids.labels == k]) for k in range(N_IDENTITIES)
        },
    }
    blocks = [code for lang, code in _FENCE.findall(PIPELINE.read_text(encoding="utf-8"))]
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # ~8x faster per frame than two threads on a loaded machine
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i, code in enumerate(blocks):
                exec(compile(code, f"{PIPELINE.name} python block {i}", "exec"), namespace)
    finally:
        torch.set_num_threads(threads)

    # n_select=5 asks for more vertex-disjoint pairs than 4 identities have: the certifier
    # certifies what exists and says so; nothing else warns
    messages = [str(w.message) for w in caught if issubclass(w.category, IdauditWarning)]
    assert any("n_select=5 asked for more" in m for m in messages), messages
    unexpected = [
        m
        for m in messages
        if "n_select=5 asked for more" not in m and "can only certify epsilon_lb = 0" not in m
    ]
    assert unexpected == []
    assert [w for w in caught if not issubclass(w.category, IdauditWarning)] == []
    assert out.getvalue() == ""  # the example prints nothing; its last lines are expressions

    run = namespace["run"]
    n_pairs = N_IDENTITIES * (N_IDENTITIES - 1) // 2
    assert run.results.sizes["pair"] == n_pairs  # pairs=100: all there are
    # "the four routes, each variable with its formal status"
    for name in ("gaussmech_epsilon", "kdelr_epsilon", "rocht_epsilon"):
        assert run.results[name].attrs["status"] == "diagnostic"
    assert run.results["mmdtv_epsilon"].attrs["status"] == "sample_estimate"
    assert run.certificates["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert 1 <= run.certificates.sizes["pair"] <= 2  # vertex-disjoint pairs of 4 identities
    assert run.controls.sizes["identity"] == N_IDENTITIES
    counts = run.embeddings.counts
    for column in ("ok", "no_face", "generator_error", "bad_output", "n_duplicate_rows"):
        assert column in counts.columns
    assert (counts["ok"] == N_PER_IDENTITY).all()  # paired mode: no face lost to pixelation
    outcomes = run.embeddings.outcomes
    assert len(outcomes) == N_IDENTITIES * N_PER_IDENTITY  # one row per draw
    assert set(outcomes["status"]) == {"ok"}
    assert len(run.pair_table()) == n_pairs
    assert any((tmp_path / "embeddings-cache").iterdir())
