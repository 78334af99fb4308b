"""Resumable zarr stores of ``audit_pairs(..., store=...)`` (idaudit.audits._store)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from idaudit import (
    GaussMechAuditor,
    InvalidInputError,
    MMDTVAuditor,
    audit_pairs,
)
from idaudit.data import all_pairs
from standins import uneven_embeddings

SRC = str(Path(__file__).resolve().parents[3] / "src")


# ------------------------------------------------------------------------------ stores
COUNTING = '''
import os, time
from idaudit import GaussMechAuditor

class CountingAuditor(GaussMechAuditor):
    """GaussMech that records the pairs it computes (and can be slowed down)."""

    seen = []

    def _run(self, batch, seed):
        time.sleep(float(os.environ.get("IDAUDIT_TEST_SLOW", "0")))
        type(self).seen.extend(batch.labels)
        return super()._run(batch, seed)
'''


def test_store_resumes_a_killed_run_without_recomputing(tmp_path: Path) -> None:
    (tmp_path / "counting.py").write_text(COUNTING)
    store = tmp_path / "results.zarr"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{SRC!r}, {str(tmp_path)!r}]
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from standins import uneven_embeddings
        from counting import CountingAuditor
        from idaudit import audit_pairs
        audit_pairs(uneven_embeddings(), "all", [CountingAuditor()], batch_size=3, n_threads=1,
                    store={str(store)!r}, progress=False, engine="chunked")
        """
    )
    env = {**os.environ, "IDAUDIT_TEST_SLOW": "0.15"}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        import zarr

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                n_done = int(
                    np.asarray(zarr.open_group(str(store), mode="r")["chunk_done"][:]).sum()
                )
            except Exception:  # not created yet
                continue
            if n_done >= 3:
                break
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    flags = np.asarray(zarr.open_group(str(store), mode="r")["chunk_done"][:])
    assert 3 <= flags.sum() < flags.size
    sys.path.insert(0, str(tmp_path))
    try:
        from counting import CountingAuditor
    finally:
        sys.path.remove(str(tmp_path))
    es = uneven_embeddings()
    pairs = all_pairs(es.identities)
    aud = CountingAuditor()
    resumed = audit_pairs(es, "all", [aud], store=store, progress=False, engine="chunked")
    # exactly the pairs of the unfinished chunks were computed, each once
    unfinished = [p for k, done in enumerate(flags) if not done for p in pairs[3 * k : 3 * k + 3]]
    assert sorted(aud.seen) == sorted(unfinished)  # chunks may run side by side
    fresh = audit_pairs(es, "all", [GaussMechAuditor()], progress=False, engine="chunked")
    assert resumed.sizes["pair"] == len(pairs)
    np.testing.assert_allclose(resumed["gaussmech_epsilon"], fresh["gaussmech_epsilon"], rtol=1e-12)
    # the finished store resumes with nothing left to do and the same Dataset
    again = CountingAuditor()
    CountingAuditor.seen = []
    xr.testing.assert_identical(
        audit_pairs(es, "all", [again], store=store, progress=False, engine="chunked"), resumed
    )
    assert CountingAuditor.seen == []
    on_disk = xr.open_zarr(store, consolidated=False)
    np.testing.assert_array_equal(on_disk["gaussmech_epsilon"], resumed["gaussmech_epsilon"])
    assert oct(store.stat().st_mode & 0o777) == oct(0o700)


def test_a_store_for_other_inputs_or_parameters_is_refused(tmp_path: Path) -> None:
    es = uneven_embeddings()
    store = tmp_path / "s.zarr"
    audit_pairs(
        es, "all", [GaussMechAuditor()], store=store, batch_size=4, progress=False, engine="chunked"
    )
    with pytest.raises(InvalidInputError, match="holds results for other embeddings"):
        audit_pairs(
            uneven_embeddings(seed=1), "all", [GaussMechAuditor()], store=store, progress=False
        )
    with pytest.raises(InvalidInputError, match="other auditors, parameters or seeds"):
        audit_pairs(
            es, "all", [GaussMechAuditor(delta=1e-3)], store=store, progress=False, engine="chunked"
        )
    with pytest.raises(InvalidInputError, match="other auditors, parameters or seeds"):
        audit_pairs(
            es, "all", [MMDTVAuditor(rng=None)], store=store, progress=False, engine="chunked"
        )
    with pytest.raises(InvalidInputError, match="holds results for other pairs"):
        audit_pairs(
            es,
            [("id00", "id02")],
            [GaussMechAuditor()],
            store=store,
            progress=False,
            engine="chunked",
        )
    with pytest.raises(
        InvalidInputError, match=r"`batch_size` must match the store's chunks \(4\)"
    ):
        audit_pairs(
            es,
            "all",
            [GaussMechAuditor()],
            store=store,
            batch_size=5,
            progress=False,
            engine="chunked",
        )
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInputError, match="is not a zarr store written by audit_pairs"):
        audit_pairs(
            es,
            "all",
            [GaussMechAuditor()],
            store=tmp_path / "plain",
            progress=False,
            engine="chunked",
        )
