"""What every auditor shares: the estimator contract, labels, device handling and seeds."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
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
from idaudit.audits._batch import Batch, PairError
from idaudit.exceptions import InvalidInputError, NotFittedError

__all__ = [
    "LABEL_PATTERN",
    "NAME",
    "RESERVED_LABELS",
    "BaseAuditor",
    "Output",
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
