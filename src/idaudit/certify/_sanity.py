"""Same-identity split-half controls (seed 000, Section 4.4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status, provenance, variable
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    check_random_state,
    spawn_seeds,
)
from idaudit.data import DUPLICATES, EmbeddingSet
from idaudit.exceptions import InvalidInputError

__all__ = ["sanity_controls"]


def sanity_controls(
    es: EmbeddingSet,
    identities: Sequence[Any] | None = None,
    *,
    n_permutations: int = 1000,
    n_folds: int = 5,
    alpha: float = 0.05,
    split: Literal["shuffled", "ordered"] = "shuffled",
    duplicates: Literal["keep", "collapse"] = "keep",
    rng: RngLike = 0,
    device: str = "cpu",
    progress: bool = True,
) -> xr.Dataset:
    r"""Split each identity in two and audit the halves as if they were two identities (§4.4).

    What a control can see depends on how the halves are formed:

    * ``split="shuffled"`` (default, as in seed 000) — each identity's rows are shuffled, then
      halved. The halves are exchangeable *by construction*, whatever the rows contain, so the
      permutation test rejects at most ``alpha`` of the time and the classifier sits at chance
      for any data. This checks the **audit machinery**: that the tests are calibrated and the
      ROC statistics behave when no difference exists. It cannot reveal structure within an
      identity (duplicated rows, sessions, a processing change); a clean result says nothing
      about the data.
    * ``split="ordered"`` — each identity's rows are halved in input order (first half against
      second half). Under iid rows this is still a true null, so a rejection rate well above
      ``alpha`` or an AUC well above 0.5 points at **order-related artefacts**: rows grouped by
      capture session, device or processing batch, or drift along the file; also duplicated
      rows stored next to each other (the copies stay in one half while the permutation test
      separates them). It sees only what changes along the input order: duplicates or
      artefacts spread evenly through the rows stay invisible.

    Exact-duplicate rows are read as in :class:`~idaudit.certify.ReservedTestCertifier`:
    ``duplicates="keep"`` treats every row as a draw (the mechanism repeats outputs), so the
    halves are formed row by row; ``duplicates="collapse"`` treats each group of copies as one
    draw and controls the identity's distinct rows (:meth:`EmbeddingSet.drop_duplicates`),
    so copies of one draw can no longer sit in both halves or, with ``"ordered"``, be
    mistaken for an order artefact.

    Parameters
    ----------
    es : EmbeddingSet
        The embeddings audited.
    identities : sequence of labels, optional
        Identities to control (default: all). Each needs at least ``2 * n_folds`` rows.
    n_permutations : int, default 1000
        Permutations of the MMD² test (Phipson–Smyth p-values), at least 1.
    n_folds : int, default 5
        Folds of the split-half ROC-HT classifier.
    alpha : float, default 0.05
        Significance level at which rejections are counted, in (0, 1).
    split : {"shuffled", "ordered"}, default "shuffled"
        How each identity is halved: after a seeded shuffle, or in input order (see above).
    duplicates : {"keep", "collapse"}, default "keep"
        Every row a draw of its own, or one draw per group of exact duplicates (see above).
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness of the halves (``"shuffled"`` only), the permutations and the folds.
    device : {"cpu", "cuda"}, default "cpu"
        Where the batched kernels run.
    progress : bool, default True
        Show progress bars.

    Returns
    -------
    xarray.Dataset
        Dim ``identity`` (coords ``identity``, ``n_half_a``, ``n_half_b``) with ``mmd2`` (the
        unbiased split-half MMD², near 0), ``mmd_pvalue``, ``rejected`` (p ≤ ``alpha``),
        ``mmdtv_epsilon`` (the MMD-TV sample estimate, near 0), ``auc`` (split-half
        out-of-fold ROC AUC: at or below 0.5 with no signal, since cross-validated AUC is
        biased below 0.5 under the null, the more so the fewer the rows) and ``corner``
        (whether the out-of-fold ROC reaches the exact corner (0, 1); never expected).
        Attrs: ``alpha``, ``split``, ``n_rejected``, ``rejection_rate``, ``mean_auc``,
        ``n_corners``, plus the settings and input hash.

    Raises
    ------
    InvalidInputError
        If an identity is unknown or has fewer than ``2 * n_folds`` rows (distinct rows with
        ``"collapse"``; named with its count), or a setting is out of range (including an
        unknown ``split`` or ``duplicates``).

    Notes
    -----
    Each identity's rows are shuffled with its own seed (``"shuffled"``) or kept in input order
    (``"ordered"``) and cut into halves of sizes :math:`\lfloor n/2\rfloor` and
    :math:`\lceil n/2\rceil`; the halves are then audited as a
    pair with :class:`idaudit.MMDTVAuditor` (median-heuristic RBF kernel, Eq. 7 and 12) and
    :class:`idaudit.ROCHTAuditor` (logistic regression, Eq. 15) through
    :func:`idaudit.audit_pairs`, so the batched kernels run once over all identities. Under
    the null the Phipson–Smyth p-value is super-uniform, so the expected rejection rate is at
    most ``alpha``; the paper reports 16 of 400 controls rejected at 0.05. With
    ``"shuffled"`` halves that null holds for every data set; with ``"ordered"`` halves it
    holds when each identity's rows are exchangeable.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet
    >>> from idaudit.certify import sanity_controls
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(120, 4)), np.repeat(["a", "b", "c"], 40))
    >>> ds = sanity_controls(es, n_permutations=200, progress=False)
    >>> int(ds.attrs["n_corners"])
    0
    """
    from idaudit.audits import MMDTVAuditor, ROCHTAuditor, audit_pairs

    if not isinstance(es, EmbeddingSet):
        raise TypeError(f"`es` must be an idaudit.EmbeddingSet; got {type(es).__name__}.")
    n_permutations = check_integer(n_permutations, "n_permutations", minimum=1)
    n_folds = check_integer(n_folds, "n_folds", minimum=2)
    alpha = check_in_range(alpha, "alpha", 0.0, 1.0)
    check_option(split, "split", ("shuffled", "ordered"))
    check_option(duplicates, "duplicates", DUPLICATES)
    labels = list(es.identities.tolist()) if identities is None else list(identities)
    draws = _checked_draws(es, labels, duplicates, n_folds)

    seed_halves, seed_mmd, seed_roc = spawn_seeds(check_random_state(rng), 3)
    halves, sizes = _split_halves(draws, labels, seed_halves, split)
    pairs = [(2 * k, 2 * k + 1) for k in range(len(labels))]
    ds = audit_pairs(
        halves,
        pairs,
        [
            MMDTVAuditor(n_permutations=n_permutations, rng=seed_mmd, device=device),
            ROCHTAuditor(n_folds=n_folds, rng=seed_roc, device=device),
        ],
        device=device,
        progress=progress,
    )

    pvalue = np.asarray(ds["mmdtv_pvalue"].values, dtype=np.float64)
    auc = np.asarray(ds["rocht_auc"].values, dtype=np.float64)
    corner = np.asarray(ds["rocht_corner"].values, dtype=bool)
    rejected = pvalue <= alpha

    def var(values: Any, long_name: str, status: Status) -> xr.Variable:
        return variable("identity", values, long_name=long_name, status=status)

    return xr.Dataset(
        {
            "mmd2": var(
                np.asarray(ds["mmdtv_mmd2"].values, dtype=np.float64),
                "split-half unbiased MMD^2",
                "sample_estimate",
            ),
            "mmd_pvalue": var(pvalue, "split-half MMD^2 permutation p-value", "sample_estimate"),
            "rejected": var(rejected, f"MMD^2 test rejects at alpha {alpha:g}", "diagnostic"),
            "mmdtv_epsilon": var(
                np.asarray(ds["mmdtv_epsilon"].values, dtype=np.float64),
                "split-half MMD-TV epsilon (should be near 0)",
                "sample_estimate",
            ),
            "auc": var(
                auc,
                "split-half out-of-fold ROC AUC (at or below 0.5 with no signal: "
                "cross-validated AUC is biased low under the null at small n)",
                "sample_estimate",
            ),
            "corner": var(corner, "split-half ROC reaches the exact (0, 1) corner", "diagnostic"),
        },
        coords={
            "identity": ("identity", np.asarray(labels)),
            "n_half_a": ("identity", np.asarray([s[0] for s in sizes], dtype=np.int64)),
            "n_half_b": ("identity", np.asarray([s[1] for s in sizes], dtype=np.int64)),
        },
        attrs={
            **provenance(
                title="same-identity split-half controls (idaudit.sanity_controls)",
                inputs={"input_sha256": str(es.sha256)},
                settings={"device": str(device)},
            ),
            "method": "same-identity split-half controls (seed 000, Section 4.4)",
            "alpha": alpha,
            "split": str(split),
            "duplicates": str(duplicates),
            "n_identities": len(labels),
            "n_rejected": int(rejected.sum()),
            "rejection_rate": float(rejected.mean()),
            "mean_auc": float(auc.mean()),
            "n_corners": int(corner.sum()),
            "n_permutations": n_permutations,
            "n_folds": n_folds,
            "rng": int(rng) if isinstance(rng, (int, np.integer)) else type(rng).__name__,
        },
    )


def _checked_draws(
    es: EmbeddingSet, labels: list[Any], duplicates: str, n_folds: int
) -> EmbeddingSet:
    """Return the rows read as draws, after checking each label has enough for the folds."""
    if not labels:
        raise InvalidInputError("`identities` must name at least one identity; got none.")
    draws = es.drop_duplicates() if duplicates == "collapse" else es
    for label in labels:
        if label not in es.counts:
            raise InvalidInputError(
                f"`identities` names identity {label!r}, which `es` does not contain."
            )
        if draws.counts[label] < 2 * n_folds:
            distinct = (
                f" but only {draws.counts[label]} distinct ones (duplicates='collapse')"
                if draws.counts[label] != es.counts[label]
                else ""
            )
            raise InvalidInputError(
                f"identity {label!r} has {es.counts[label]} rows{distinct}; a split-half "
                f"control with `n_folds`={n_folds} needs at least {2 * n_folds}."
            )
    return draws


def _split_halves(
    draws: EmbeddingSet,
    labels: list[Any],
    seed_halves: int,
    split: str,
) -> tuple[EmbeddingSet, list[tuple[int, int]]]:
    """Cut each identity in two halves, labelled ``2k`` and ``2k + 1``, and their sizes."""
    half_seeds = spawn_seeds(seed_halves, len(labels))
    blocks: list[npt.NDArray[np.float64]] = []
    codes: list[npt.NDArray[np.int64]] = []
    sizes: list[tuple[int, int]] = []
    for k, (label, seed) in enumerate(zip(labels, half_seeds, strict=False)):
        rows = draws.get(label)  # (n_id, d) in input order
        if split == "shuffled":
            order = np.random.default_rng(seed).permutation(len(rows))
        else:
            order = np.arange(len(rows))  # first half against second half
        half = len(rows) // 2
        blocks.append(rows[order])
        codes.append(np.r_[np.full(half, 2 * k), np.full(len(rows) - half, 2 * k + 1)])
        sizes.append((half, len(rows) - half))
    halves = EmbeddingSet(
        np.concatenate(blocks), np.concatenate(codes), normalize=False, min_norm=0.0
    )
    return halves, sizes
