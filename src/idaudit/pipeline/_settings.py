"""Settings of the generator workflows: how draws are made, and what is computed on them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from idaudit._validation import check_integer, check_option
from idaudit.data import FAILURES
from idaudit.exceptions import InvalidInputError

__all__ = ["AuditSettings", "DrawSettings", "Sampling"]

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
