"""Settings of the workflows: draws, audits, and the privacy check's statistics."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from idaudit._validation import check_in_range, check_integer, check_option
from idaudit.data import FAILURES
from idaudit.exceptions import InvalidInputError
from idaudit.memorization import DEFAULT_PERCENTILES, check_percentiles

__all__ = ["AuditSettings", "DrawSettings", "PrivacyStatistics", "Sampling"]

Sampling = Literal["each", "with_replacement"]


@dataclass(frozen=True)
class DrawSettings:
    r"""How each identity's source images are drawn through the generator, and kept.

    Attributes
    ----------
    mode : {"detect", "paired"}, default "detect"
        ``"detect"`` finds the face in each output (faces the detector misses are lost and
        counted); ``"paired"`` detects on the original frame and cuts the same crop from the
        output (see :class:`~idaudit.pipeline.EncodedGenerator`).
        :func:`~idaudit.pipeline.compare_conditions` defaults to ``"paired"``.
    sampling : {"each", "with_replacement"}, default "each"
        ``"each"``: every source image ``repeats`` times, in order — no duplicate rows from a
        deterministic generator unless ``repeats > 1``. ``"with_replacement"``:
        ``n_per_identity`` sources drawn uniformly with replacement (the model
        :math:`X \sim P_{id}` of seed 000, Eq. 8, with :math:`P_{id}` uniform over the
        given sources), which repeats sources; a deterministic generator then yields exact
        duplicate rows — iid draws of that channel, counted and warned about (certify them
        with ``duplicates="keep"``, the certifier's default).
    repeats : int, default 1
        Uses of each source under ``sampling="each"`` (> 1 only makes sense for a generator
        with internal randomness).
    n_per_identity : int, optional
        Draws per identity under ``sampling="with_replacement"``.
    min_rows : int, optional
        Identities with fewer usable rows are excluded and named. Default: what the auditors
        and the certifier need (5 with ROC-HT's 5 folds; ``certifier.min_rows()``), and 2
        for :func:`~idaudit.pipeline.encode_generator` alone.
    failures : {"keep", "drop"}, default "keep"
        What the :class:`~idaudit.data.EmbeddingSet` of the draws does with the failed draws
        (no face, generator error, bad output) of the kept identities. ``"keep"``: each is a
        failed output of its identity, coded by its status — an observation of the mechanism
        that certificates count (a generator that loses one identity's face more often than
        another's is telling them apart). ``"drop"``: they are dropped and counted, and the
        certificates describe the generator *conditioned on success*, which can understate
        or overstate its ε. Either way the audits compute on the successful rows, and the
        failures are counted per identity and per pair.
    output_shape : "source", (H, W) or None, default "source"
        The size outputs must have: their source's, a fixed ``(H, W)``, or any size
        (``None``, detect mode only).
    batch_size : int, default 64
        Images per generator batch and crops per encoder call.
    """

    mode: Literal["detect", "paired"] = "detect"
    sampling: Sampling = "each"
    repeats: int = 1
    n_per_identity: int | None = None
    min_rows: int | None = None
    failures: Literal["keep", "drop"] = "keep"
    output_shape: Literal["source"] | tuple[int, int] | None = "source"
    batch_size: int = 64

    def __post_init__(self) -> None:
        check_option(self.sampling, "sampling", ("each", "with_replacement"))
        check_option(self.failures, "failures", FAILURES)
        check_integer(self.repeats, "repeats", minimum=1)
        check_integer(self.batch_size, "batch_size", minimum=1)
        if self.min_rows is not None:
            check_integer(self.min_rows, "min_rows", minimum=1)
        if self.sampling == "with_replacement":
            if self.n_per_identity is None:
                raise InvalidInputError("`sampling`='with_replacement' needs `n_per_identity`.")
            check_integer(self.n_per_identity, "n_per_identity", minimum=1)
        elif self.n_per_identity is not None:
            raise InvalidInputError(
                "`n_per_identity` applies to sampling='with_replacement' only; with "
                "sampling='each' every source is used `repeats` times."
            )
        if self.mode not in ("detect", "paired"):
            raise InvalidInputError(
                f"`mode` must be 'detect' or 'paired'; got {self.mode!r} (outputs that are "
                "already aligned crops: idaudit.pipeline.EncodedGenerator(generator, encoder, "
                "images))."
            )


@dataclass(frozen=True)
class AuditSettings:
    """What is computed on the embeddings of the draws.

    Attributes
    ----------
    pairs : int, "all" or sequence of (label, label), default 100
        An int audits that many pairs of a seeded shuffle of all pairs of the kept
        identities (all, if there are fewer, with a warning naming both numbers: the results
        attrs ``n_pairs_requested`` and ``n_pairs_available`` keep them and ``to_markdown``
        says so); a list is filtered: pairs with an excluded identity are dropped and
        returned in ``dropped_pairs``. :func:`~idaudit.pipeline.compare_conditions` takes an
        int or ``"all"``.
    auditors : sequence of auditors, optional
        Default: GaussMech, KDE-LR (α = 0), MMD-TV and ROC-HT (5 folds).
    certifier : ReservedTestCertifier, optional
        Fitted on the kept rows and ``pairs``; its ``certificates_`` are returned.
    controls : bool, default False
        Run :func:`idaudit.certify.sanity_controls` (200 permutations) on the identities
        with at least 10 usable rows (:func:`~idaudit.pipeline.audit_generator`).
    reference : str, optional
        :func:`~idaudit.pipeline.compare_conditions` only: the condition (usually the
        identity map, "no anonymisation") against which every condition's re-identification
        is reported (:func:`~idaudit.pipeline.linkage_report`).
    device : str, default "cpu"
        Where the batched audit kernels run.
    """

    pairs: int | str | Sequence[tuple[Any, Any]] = 100
    auditors: Sequence[Any] | None = None
    certifier: Any = None
    controls: bool = False
    reference: str | None = None
    device: str = "cpu"


@dataclass(frozen=True)
class PrivacyStatistics:
    """What :func:`~idaudit.pipeline.run_privacy_check` computes, on what units, with what seed.

    Every field is checked on construction; ``percentiles`` is kept as a tuple of floats.

    Attributes
    ----------
    percentiles : sequence of float, default (1, 2, 5, 10, 20)
        Flagging operating points, distinct, each in (0, 100).
    percentile_method : {"order_statistic", "linear"}, default "order_statistic"
        Held-out percentile behind the thresholds
        (:func:`~idaudit.memorization.flagging_from_distances`).
    n_permutations : int, default 9999
        Permutations of the flagging p-value (0: none).
    n_bootstrap : int, default 1000
        NNAA split-half draws behind the intervals (0: no intervals).
    nnaa_permutations : int, default 999
        Relabellings of the NNAA privacy-loss test (0: none); each recomputes every nearest
        neighbour, so it costs more than a flagging permutation.
    max_samples, lpips_max_samples : int, default 1000 and 200
        NNAA set caps (at least 2) for embeddings and for the appearance metric (seeded
        subsets; with ``subjects`` or ``subject_pattern``, whole subjects, so the
        subject-level test stays exact: :func:`~idaudit.memorization.nnaa`).
    confidence_level : float, default 0.95
        Of every interval, in (0, 1).
    duplicates : {"collapse", "keep"}, default "collapse"
        Byte-identical files within one split and cohort count once ("collapse": a copy of
        a file is not a new image) or each ("keep").
    subject_pattern : str, optional
        Regex whose first capture group (or group ``subject``) in each real image's file
        name is its subject; every training and held-out file must match. Permutations and
        split halves then move whole subjects, a subject in both training and held-out is
        refused, and the metric sanity check runs.
    subjects : path, optional
        CSV with a file column (``file``/``path``: path relative to the split root, or the
        file name) and a ``subject`` column, one row per training and held-out image; used
        as ``subject_pattern`` is (give one of the two, not both). Without either, each
        image is its own subject: images are assumed exchangeable (report.md says so).
        Synthetic images are each their own subject.
    rng : int, default 0
        Seed (>= 0) of the permutations, subsets and bootstrap.
    """

    percentiles: Sequence[float] = DEFAULT_PERCENTILES
    percentile_method: Literal["order_statistic", "linear"] = "order_statistic"
    n_permutations: int = 9999
    n_bootstrap: int = 1000
    nnaa_permutations: int = 999
    max_samples: int = 1000
    lpips_max_samples: int = 200
    confidence_level: float = 0.95
    duplicates: Literal["collapse", "keep"] = "collapse"
    subject_pattern: str | None = None
    subjects: str | os.PathLike[str] | None = None
    rng: int = 0

    def __post_init__(self) -> None:
        checked: dict[str, Any] = {
            "percentiles": tuple(check_percentiles(self.percentiles).tolist()),
            "n_permutations": check_integer(self.n_permutations, "n_permutations", minimum=0),
            "n_bootstrap": check_integer(self.n_bootstrap, "n_bootstrap", minimum=0),
            "nnaa_permutations": check_integer(
                self.nnaa_permutations, "nnaa_permutations", minimum=0
            ),
            "max_samples": check_integer(self.max_samples, "max_samples", minimum=2),
            "lpips_max_samples": check_integer(
                self.lpips_max_samples, "lpips_max_samples", minimum=2
            ),
            "confidence_level": check_in_range(
                self.confidence_level, "confidence_level", 0.0, 1.0
            ),
            "rng": check_integer(self.rng, "rng", minimum=0),
        }
        check_option(self.percentile_method, "percentile_method", ("order_statistic", "linear"))
        check_option(self.duplicates, "duplicates", ("collapse", "keep"))
        if self.subject_pattern is not None and not isinstance(self.subject_pattern, str):
            raise TypeError(
                "`subject_pattern` must be a regex string; got "
                f"{type(self.subject_pattern).__name__}."
            )
        if self.subjects is not None and not isinstance(self.subjects, str | os.PathLike):
            raise TypeError(
                f"`subjects` must be a path to a CSV; got {type(self.subjects).__name__}."
            )
        if self.subjects is not None and self.subject_pattern is not None:
            raise InvalidInputError("give `subjects` or `subject_pattern`, not both.")
        for name, value in checked.items():  # frozen: the checked, normalised values
            object.__setattr__(self, name, value)
