"""What every auditor shares: the estimator contract, device handling, batching and seeds."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch
from sklearn.base import BaseEstimator

from idaudit._device import resolve_device
from idaudit._results import Status
from idaudit._validation import (
    Constraint,
    Label,
    check_pair,
    check_random_state,
    spawn_seeds,
    validate_params,
)
from idaudit.exceptions import InvalidInputError, NotFittedError
from idaudit.ops import PairBatch, pack_pairs

__all__ = [
    "LABEL_PATTERN",
    "NAME",
    "RESERVED_LABELS",
    "BaseAuditor",
    "CallCache",
    "Output",
    "PairError",
    "StatusEstimator",
]

#: Labels (variable prefixes): a letter or underscore, then letters, digits, ``_``, ``.``, ``-``.
#: Result attributes are keyed ``"<label>.<parameter>"``; parameter names never hold a dot, so
#: a key splits unambiguously at its *last* dot (``"kdelr_mix0.01.n_grid"``).
LABEL_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")

#: Labels an auditor may not take: the prefixes of the run-level attributes of a result
#: (:func:`idaudit._results.provenance` writes ``seed.<name>`` and ``setting.<name>``).
RESERVED_LABELS = frozenset({"seed", "setting"})

#: The constraint of every auditor's ``name``.
NAME = Label(
    LABEL_PATTERN.pattern,
    "a label of letters, digits, '_', '.' or '-' starting with a letter or '_', such as "
    "'mmdtv_wide', other than 'seed' and 'setting'",
    RESERVED_LABELS,
)

FloatArray = npt.NDArray[np.float64]


class PairError(InvalidInputError):
    """Bad data in one pair of a batch; ``pair_index`` says which (0-based, in the batch)."""

    def __init__(self, message: str, pair_index: int) -> None:
        super().__init__(message)
        self.pair_index = pair_index


@dataclass(frozen=True)
class Output:
    """One per-pair output of an auditor, as it appears in :func:`idaudit.audit_pairs`.

    Attributes
    ----------
    name : str
        Suffix of the variable name (``"<label>_<name>"``) and of the fitted attribute
        (``"<name>_"``).
    long_name : str
        Human-readable description (the variable's ``long_name`` attribute).
    status : str
        Formal status of the number (the variable's ``status`` attribute).
    dtype : type
        ``float`` or ``bool``.
    dims : tuple of str
        Dimensions after ``pair`` (empty for one number per pair), e.g. ``("embedding_dim",)``
        for a value per embedding coordinate.
    n_simultaneous : int
        For a certified output: how many pairs' values hold jointly at the stated confidence
        (the variable's ``n_simultaneous`` attribute; a maximum over more pairs is not
        certified, see :func:`idaudit.results.reduce_status`). 1 for per-pair confidence.
    """

    name: str
    long_name: str
    status: Status
    dtype: type = float
    dims: tuple[str, ...] = ()
    n_simultaneous: int = 1


@dataclass
class CallCache:
    """What one :func:`idaudit.audit_pairs` call computes once and reuses across its batches.

    One instance lives as long as a call (the local backend), a dask worker process's share of
    calls on one input (the dask backend, keyed by the input's hash, its ``failures`` setting
    and the device) or a series of :func:`idaudit.audits.logistic_oof_logits` calls
    (``shared=``); every :class:`Batch` of that span holds it as ``Batch.shared``. Everything
    in it depends on one identity or on the sizes of a pair, never on the pair itself, so a
    pair's numbers do not depend on which batch computed a cached value.

    Attributes
    ----------
    width : int, default 0
        Rows of the widest identity of the call. Each identity's rows and Gram block are
        zero-padded to it, so blocks cached for one batch fit every later one; 0 pads each
        identity to its own size.
    rows : dict
        Identity label -> its rows, numpy.ndarray of float64 of shape (n, d), looked up in the
        :class:`~idaudit.EmbeddingSet` once per call.
    failed : mapping or None, default None
        Identity label -> its failed outputs (:attr:`~idaudit.EmbeddingSet.failed_counts`),
        copied once per call when the first chunk needs it; None until then.
    per_identity : dict
        Cache name (``"rows_gram"``, ``"gaussmech"``, ...) -> identity label -> what
        :meth:`Batch.per_identity` computed for that identity under that name.
    rocht_folds : dict
        ``(n_folds, fold_seed)`` -> ``(n_a, n_b)`` -> the ROC-HT cross-validation folds of a
        pair of those sizes (they depend only on the sizes and the seed).
    """

    width: int = 0
    rows: dict[Any, FloatArray] = field(default_factory=dict)
    failed: Mapping[Any, int] | None = None
    per_identity: dict[str, dict[Any, Any]] = field(default_factory=dict)
    rocht_folds: dict[tuple[int, int], dict[tuple[int, int], Any]] = field(default_factory=dict)


class Batch:
    """The pairs one kernel call covers, plus a cache shared by the auditors run on them.

    Several auditors run on the same batch reuse expensive intermediate results through
    ``cache`` (pooled distances and median bandwidths for MMD-TV at several bandwidth scales,
    Gram matrices for ROC-HT), or compute what their siblings in ``auditors`` need in the
    same pass (KDE-LR's densities reduced for every ``mix`` at once), so nothing is computed
    twice.
    """

    def __init__(
        self,
        samples: Sequence[tuple[FloatArray, FloatArray]],
        device: torch.device,
        labels: Sequence[tuple[Any, Any]] | None = None,
        shared: CallCache | None = None,
        auditors: Sequence[BaseAuditor] = (),
        failures: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        self.samples = list(samples)
        self.device = device
        self.labels = None if labels is None else list(labels)
        # failed outputs of each pair's identities (EmbeddingSet.failed_counts): not in
        # ``samples``; the certified routes count them as an output atom
        self.failures = [(0, 0)] * len(self.samples) if failures is None else list(failures)
        # the auditors that will run on this batch, so that one can compute what its
        # siblings need in the same pass (KDE-LR reduces every mix while densities are hot)
        self.auditors = tuple(auditors)
        self.cache: dict[Any, Any] = {}
        # per-identity results reused across the batches of one audit_pairs call
        self.shared = CallCache() if shared is None else shared

    @cached_property
    def packed(self) -> PairBatch:
        """The pairs as one zero-padded float64 tensor on ``device``."""
        if self.labels is None:
            return pack_pairs(self.samples, self.device)
        return PairBatch(x=self._pooled_rows(), n_a=self.n_a, n_b=self.n_b)

    @property
    def n_pairs(self) -> int:
        """Number of pairs."""
        return len(self.samples)

    @cached_property
    def n_a(self) -> tuple[int, ...]:
        """Rows of identity A in each pair (no tensor is built)."""
        return tuple(int(a.shape[0]) for a, _ in self.samples)

    @cached_property
    def n_b(self) -> tuple[int, ...]:
        """Rows of identity B in each pair."""
        return tuple(int(b.shape[0]) for _, b in self.samples)

    def per_identity(self, key: str, side: int, pair: int, compute: Any) -> Any:
        """``compute(rows)`` for one identity of one pair, cached per identity label.

        With identity labels, the value is computed once per :func:`idaudit.audit_pairs` call
        (``shared`` outlives the batch) whatever the number of pairs the identity is in;
        without labels (a single ``fit``) it is simply computed.
        """
        rows = self.samples[pair][side]
        if self.labels is None:
            return compute(rows)
        cache = self.shared.per_identity.setdefault(key, {})
        label = self.labels[pair][side]
        if label not in cache:
            cache[label] = compute(rows)
        return cache[label]

    def _identity(self, pair: int, side: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows and Gram matrix of one identity, zero-padded to the call's widest identity."""

        def compute(rows: FloatArray) -> tuple[torch.Tensor, torch.Tensor]:
            width = max(self.shared.width, rows.shape[0])
            x = torch.zeros(width, rows.shape[1], dtype=torch.float64, device=self.device)
            x[: rows.shape[0]] = torch.from_numpy(rows).to(self.device)
            return x, x @ x.T  # (width, d), (width, width): zero outside the real rows

        out: tuple[torch.Tensor, torch.Tensor] = self.per_identity("rows_gram", side, pair, compute)
        return out

    def _blocks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return the padded rows of A and B and each pooled row's source position.

        Shapes (pairs, w_a, d), (pairs, w_b, d) and (pairs, n_max): pooled row ``r`` of pair
        ``p`` is row ``pos[p, r]`` of ``cat([A rows, B rows, one zero row])``.
        """
        if "blocks" in self.cache:
            cached: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = self.cache["blocks"]
            return cached
        n_a, n_b = np.asarray(self.n_a), np.asarray(self.n_b)
        w_a, w_b = int(n_a.max()), int(n_b.max())
        n_max = int((n_a + n_b).max())
        xa = torch.stack([_fit(self._identity(p, 0)[0], w_a, 0) for p in range(self.n_pairs)])
        xb = torch.stack([_fit(self._identity(p, 1)[0], w_b, 0) for p in range(self.n_pairs)])
        # pooled position r of pair p: A row r, then B row r - n_a, then padding
        r = np.arange(n_max)[None, :]
        pos = np.where(
            r < n_a[:, None],
            r,
            np.where(r < (n_a + n_b)[:, None], w_a + r - n_a[:, None], w_a + w_b),
        )  # (pairs, n_max)
        out = (xa, xb, torch.from_numpy(pos).to(self.device))
        self.cache["blocks"] = out
        return out

    def _pooled_rows(self) -> torch.Tensor:
        """Pooled rows (pairs, n_max, d), gathered from the per-identity rows."""
        xa, xb, pos = self._blocks()
        rows = torch.nn.functional.pad(torch.cat([xa, xb], 1), (0, 0, 0, 1))  # + a zero row
        return rows.gather(1, pos[:, :, None].expand(-1, -1, rows.shape[2]))

    def _pooled_gram(self) -> torch.Tensor:
        """Pooled Gram matrices (pairs, n_max, n_max) from per-identity blocks.

        Each identity's rows and own Gram block are computed once per call (``shared``); per
        pair only the A-B block is multiplied, straight into its place, and the identity
        blocks are copied in, so each entry is written once (stacking rows for one large
        product, or gathering padded blocks, moves more memory than the products cost).
        """
        n_a, n_b = self.n_a, self.n_b
        n_max = max(a + b for a, b in zip(n_a, n_b, strict=True))
        out = torch.empty(self.n_pairs, n_max, n_max, dtype=torch.float64, device=self.device)
        for p, (na, nb) in enumerate(zip(n_a, n_b, strict=True)):
            xa, ga = self._identity(p, 0)
            xb, gb = self._identity(p, 1)
            end = na + nb
            torch.mm(xa[:na], xb[:nb].T, out=out[p, :na, na:end])  # the only per-pair product
            out[p, na:end, :na] = out[p, :na, na:end].T
            out[p, :na, :na] = ga[:na, :na]
            out[p, na:end, na:end] = gb[:nb, :nb]
            out[p, end:].zero_()
            out[p, :end, end:].zero_()
        return out

    def gram(self) -> torch.Tensor:
        """Inner products within each pooled sample, (pairs, n_max, n_max) (cached).

        With identity labels, each identity's own block is computed once per
        :func:`idaudit.audit_pairs` call and only the A-B block per pair: on 500 pairs of
        400 identities that is less than half the arithmetic of whole pooled products.
        """
        if "gram" in self.cache:
            gram: torch.Tensor = self.cache["gram"]
            return gram
        if self.labels is None:
            x = self.packed.x
            gram = x @ x.transpose(1, 2)  # (pairs, n_max, n_max)
        else:
            gram = self._pooled_gram()
        self.cache["gram"] = gram
        return gram

    def masks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Membership masks of A and B rows, each (pairs, n_max) (cached)."""
        if "masks" not in self.cache:
            n_a = torch.tensor(self.n_a, device=self.device)[:, None]  # (pairs, 1)
            n_ab = n_a + torch.tensor(self.n_b, device=self.device)[:, None]
            rows = torch.arange(int(n_ab.max()), device=self.device)  # (n_max,)
            self.cache["masks"] = (
                (rows < n_a).to(torch.float64),  # (pairs, n_max)
                ((rows >= n_a) & (rows < n_ab)).to(torch.float64),
            )
        masks: tuple[torch.Tensor, torch.Tensor] = self.cache["masks"]
        return masks


def _square(g: torch.Tensor, width: int) -> torch.Tensor:
    """Cut or zero-pad a square block to ``width`` x ``width``."""
    have = g.shape[0]
    if have >= width:
        return g[:width, :width]
    return torch.nn.functional.pad(g, (0, width - have, 0, width - have))


def _fit(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """``t`` cut or zero-padded to ``width`` along ``dim`` (cached blocks may be wider)."""
    have = t.shape[dim]
    if have >= width:
        return t.narrow(dim, 0, width)
    pad = [0, 0] * (t.dim() - dim - 1) + [0, width - have]
    return torch.nn.functional.pad(t, pad)


class StatusEstimator:
    """What idaudit's estimators share beyond scikit-learn's ``BaseEstimator``.

    The repr ends with the formal status of the estimator's headline number, and reading a
    fitted attribute (a public name ending in ``_``) before ``fit`` raises
    :class:`~idaudit.exceptions.NotFittedError` instead of a bare ``AttributeError``. A
    subclass sets ``status``, ``_fitted`` (an attribute ``fit`` always sets) and ``_fit_call``
    (how to call ``fit``, for the message), and lists this class before ``BaseEstimator``.
    """

    status: ClassVar[Status]
    _fitted: ClassVar[str]
    _fit_call: ClassVar[str] = "fit"

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        """Parameters as scikit-learn prints them, then the formal status."""
        return f"{super().__repr__(N_CHAR_MAX)}  # status: {self.status}"  # type: ignore[call-arg]

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails
        if name.endswith("_") and not name.startswith("_") and self._fitted not in self.__dict__:
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet; call `{self._fit_call}` "
                f"before reading `{name}`."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class BaseAuditor(StatusEstimator, BaseEstimator, ABC):  # type: ignore[misc]
    """Base class of the identity-level DP auditors (seed 000, Section 3).

    An auditor turns the embeddings of two identities into an ε with a declared formal
    status. ``__init__`` only stores parameters; :meth:`fit` validates the data, computes and
    returns ``self``; results end in ``_``. Subclasses implement one *batched* method,
    ``_run``, over many pairs; ``fit`` is the one-pair case of the same method, and
    :func:`idaudit.audit_pairs` calls it on many pairs at once, so both give the same numbers.

    Attributes
    ----------
    status : str
        Class attribute: formal status of ``epsilon_``, ``"diagnostic"`` or
        ``"sample_estimate"`` (see docs/status.md).
    symmetric : bool
        Class attribute: whether swapping the two identities leaves ``epsilon_`` unchanged
        exactly (checked by :func:`check_auditor`).
    row_order_invariant : bool
        Class attribute: whether shuffling the rows of either identity leaves ``epsilon_``
        unchanged exactly.
    label : str
        Prefix of this auditor's variables in :func:`idaudit.audit_pairs` results.

    Notes
    -----
    A new auditor subclasses this, stores its parameters in ``__init__``, declares its
    outputs in :meth:`outputs`, declares one constraint per parameter in
    ``_parameter_constraints`` (:mod:`idaudit._validation`: ``Interval``, ``Options``, ...) and
    implements
    ``_run(batch, seed)`` returning one array (or list) per output over the batch's pairs;
    then :func:`check_auditor` should pass.
    """

    status: ClassVar[Status] = "diagnostic"
    _fitted = "epsilon_"
    _fit_call = "fit(emb_a, emb_b)"
    #: One constraint per constructor parameter, checked by ``fit`` (and ``audit_pairs``).
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {"name": NAME}
    symmetric: ClassVar[bool] = True
    row_order_invariant: ClassVar[bool] = True
    _prefix: ClassVar[str] = ""
    _random: ClassVar[bool] = False

    # ------------------------------------------------------------------ public API
    @property
    def label(self) -> str:
        """Prefix of this auditor's variables in :func:`idaudit.audit_pairs` results."""
        name = getattr(self, "name", None)
        return str(name) if name is not None else self._default_label()

    @abstractmethod
    def outputs(self) -> tuple[Output, ...]:
        """Return the per-pair outputs this auditor reports with its current parameters."""

    def fit(self, emb_a: npt.ArrayLike, emb_b: npt.ArrayLike) -> BaseAuditor:
        """Audit one identity pair.

        Parameters
        ----------
        emb_a : array_like, shape (n_a, d)
            Embeddings of identity A (finite; at least :meth:`min_rows` rows).
        emb_b : array_like, shape (n_b, d)
            Embeddings of identity B, same ``d``.

        Returns
        -------
        self
            With ``epsilon_`` and the other fitted attributes set.

        Raises
        ------
        InvalidInputError
            If an input is not 2-D, is empty or too short, holds NaN/inf, the dimensions
            differ, or a parameter is invalid.
        """
        self._check_params()
        a, b = check_pair(emb_a, emb_b, min_rows=self.min_rows())
        device = resolve_device(getattr(self, "device", "cpu"))
        seed = self._draw_seed()
        try:
            result = self._for_pairs(1)._run(Batch([(a, b)], device), seed)
        except PairError as exc:
            raise InvalidInputError(str(exc)) from None
        for key, values in result.items():
            value = values[0]
            if isinstance(value, np.bool_):
                value = bool(value)
            elif isinstance(value, np.floating):
                value = float(value)
            setattr(self, key + "_", value)
        self.n_a_ = int(a.shape[0])
        self.n_b_ = int(b.shape[0])
        self.seed_ = seed
        return self

    def min_rows(self) -> int:
        """Fewest rows each identity must have for this auditor."""
        return 2

    def _for_pairs(self, n_pairs: int) -> BaseAuditor:
        """Return the auditor as run over ``n_pairs`` pairs (settings that depend on the count).

        :func:`idaudit.audit_pairs` calls it once it knows the number of pairs;
        :meth:`fit` audits one pair. The default returns ``self``.
        """
        return self

    # ------------------------------------------------------------------ for subclasses
    def _default_label(self) -> str:
        return self._prefix

    def recorded_params(self) -> dict[str, Any]:
        """Return the parameters a result records (``<label>.<param>`` attributes).

        ``get_params(deep=False)``; an auditor may override it to record a setting under
        another name.
        """
        return dict(self.get_params(deep=False))

    def _check_params(self) -> None:
        """Validate every parameter against :attr:`_parameter_constraints` (raise naming it)."""
        validate_params(self.get_params(deep=False), self._parameter_constraints)

    def _draw_seed(self) -> int | None:
        """One 63-bit seed from ``rng`` for this fit (None for deterministic auditors).

        Every pair of one call uses this same seed, so a pair's numbers do not depend on
        where it sits in the pair list, on the batch size or on the backend.
        """
        if not self._random:
            return None
        return spawn_seeds(check_random_state(self.rng), 1)[0]

    def _tileable(self) -> bool:
        """Whether the tiled engine of ``pairs="all"`` can run this auditor as configured.

        An auditor that says yes implements ``_run_tile(tile)`` (see
        :mod:`idaudit.audits._tiles`), giving the numbers ``_run`` gives on the same pairs.
        """
        return False

    def _run_tile(self, tile: Any) -> dict[str, Any]:
        """Audit every pair of a tile (only called when :meth:`_tileable` is true)."""
        raise TypeError(f"{type(self).__name__} has no tiled kernel; check _tileable() first.")

    @abstractmethod
    def _run(self, batch: Batch, seed: int | None) -> dict[str, Any]:
        """Audit every pair of ``batch``: output name -> array (pairs,) or list of length pairs."""
