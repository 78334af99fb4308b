"""Calibrated-noise benchmark: every audit against a mechanism whose ε is known (seed 000, §5.2).

The audited generators of seed 000 are so distinguishable that the four audits cannot be
compared there. :func:`noise_sweep` adds noise of a growing scale to base identity embeddings —
from the endpoint regime (ROC AUC ≈ 1) to near chance — and, at every scale, runs the audits,
the reserved-test certificate and the mechanism's own guarantee on the same draws, so each
method's soundness (never above the truth, for the lower-bound routes) and power (how close it
gets) can be read off one Dataset.

Which truth a route is compared with matters. ``true_epsilon`` is stated at the sweep's
``delta``: for ``LaplaceNoise`` (δ = 0) it is the pure ε that MMD-TV, its hockey-stick variant,
ROC-HT and a δ = 0 certificate all bound. For ``GaussianNoise`` it is ε(δ) at δ = 1e-5, the
right truth for GaussMech and for a certificate run at that δ; the pure-DP routes (MMD-TV,
ROC-HT at δ = 0) bound the *pure* ε, which is infinite for Gaussian noise, so "MMD-TV ≤
true_epsilon" is no soundness check there — use the Laplace sweep for those routes.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr
from sklearn.base import clone
from tqdm.auto import tqdm

from idaudit._results import provenance, reduction_attrs, variable
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    check_random_state,
    spawn_seeds,
)
from idaudit.data import EmbeddingSet, sample_pairs
from idaudit.exceptions import InvalidInputError
from idaudit.mechanisms import GaussianNoise, LaplaceNoise, add_guarantee, sample_embeddings

if TYPE_CHECKING:
    from idaudit.audits import BaseAuditor
    from idaudit.certify import ReservedTestCertifier, SequentialCertifier

__all__ = ["noise_sweep"]

_SCALE_NAMES = {"gaussian": "Gaussian noise sd sigma", "laplace": "Laplace scale b"}


def noise_sweep(
    base: EmbeddingSet,
    scales: Sequence[float] | npt.NDArray[np.float64],
    *,
    mechanism: Literal["gaussian", "laplace"] = "gaussian",
    n_pairs: int = 20,
    n_per_identity: int = 100,
    auditors: Sequence[BaseAuditor] | None = None,
    certifier: ReservedTestCertifier | None = None,
    certify: bool = True,
    sequential: SequentialCertifier | None = None,
    delta: float | None = None,
    rng: RngLike = 0,
    device: str = "cpu",
    progress: bool = True,
) -> xr.Dataset:
    r"""Audit a noise mechanism of known ε at a sweep of noise scales.

    Parameters
    ----------
    base : EmbeddingSet
        Base embeddings per identity. A point base (one row per identity) makes every pair's
        true ε exact; see :class:`idaudit.mechanisms.GaussianNoise`.
    scales : sequence of float, shape (n_scales,)
        Noise scales, all > 0 and distinct: σ for ``"gaussian"``, the Laplace scale b for
        ``"laplace"``.
    mechanism : {"gaussian", "laplace"}, default "gaussian"
        :class:`~idaudit.mechanisms.GaussianNoise` (known ε(δ), seed 000 Section 5.2) or
        :class:`~idaudit.mechanisms.LaplaceNoise` (known pure ε, so the pure-DP routes have a
        finite truth).
    n_pairs : int, default 20
        Pairs audited: the first ``n_pairs`` of ``sample_pairs(base.identities)`` under a seed
        derived from ``rng``; at most the number of unordered pairs of ``base``'s identities.
    n_per_identity : int, default 100
        Outputs drawn per identity at every scale.
    auditors : sequence of BaseAuditor, optional
        Default: ``GaussMechAuditor()``, ``KDELRAuditor()``, ``MMDTVAuditor()`` and
        ``ROCHTAuditor(rng=...)`` — the four routes of seed 000.
    certifier : ReservedTestCertifier, optional
        Cloned at every scale and fit on the same draws and pairs. Its ``delta`` must equal
        the sweep's ``delta``: ``certified_epsilon`` is set beside ``true_epsilon``, and a
        bound at one δ says nothing against a truth at another. Default:
        ``ReservedTestCertifier(n_candidates=n_pairs, n_select=min(5, k), delta=delta,
        rng=...)``, where k is the largest number of vertex-disjoint pairs that greedy selection
        finds among the audited pairs in *any* rank order (half a maximal matching, rounded up).
    certify : bool, default True
        Whether to run the certifier at all.
    sequential : SequentialCertifier, optional
        A template (its ``mechanism`` and ``pairs`` are replaced): at every scale a clone
        certifies the audited pairs of that scale's mechanism, drawing its own outputs (up to
        its ``max_samples`` per identity after ``n_dev`` development draws). Its ``delta``
        must equal the sweep's ``delta``. Adds ``sequential_epsilon`` (scale, pair),
        ``sequential_epsilon_max`` and ``sequential_n_used`` (scale).
    delta : float, optional
        The δ at which the truth and the certificate are stated, in [0, 1). Default: the
        mechanism's ``default_delta`` — 1e-5 for ``"gaussian"`` (whose pure ε is infinite) and
        0 for ``"laplace"``.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness of the pairs, the draws, the auditors and the certifier.
    device : {"cpu", "cuda"}, default "cpu"
        Where the audit kernels run.
    progress : bool, default True
        Show a progress bar over the scales.

    Returns
    -------
    xarray.Dataset
        Dims ``scale`` (coordinate: the scales, plus ``noise_sd``, the per-coordinate noise
        standard deviation — σ, or b√2 for Laplace) and ``pair`` (coords ``identity_a``,
        ``identity_b``, ``n_a``, ``n_b``). Variables: every auditor output
        (``<label>_<output>``, dims ``(scale, pair)``); ``true_epsilon`` (the pair's ε at
        ``delta``; exact where ``true_epsilon_exact``); ``reference_epsilon`` (scale: the
        mechanism-wide guarantee); ``certified_epsilon`` (the certificate of the selected
        pairs, NaN elsewhere) and ``certified_epsilon_max`` (scale); with ``sequential``, the
        sequential certificate of every pair. Attrs record the
        mechanism, ``delta``, sizes, seeds, the base's hash and the idaudit version.

    Raises
    ------
    InvalidInputError
        If a scale is not positive and finite or scales repeat, ``n_pairs`` exceeds the
        number of identity pairs, ``delta`` is outside [0, 1), ``certifier`` is given with
        ``certify=False``, or ``certifier.delta`` differs
        from ``delta``.
    TypeError
        If ``base`` is not an :class:`~idaudit.data.EmbeddingSet`, ``certify`` is not a bool
        or ``certifier`` is not a :class:`~idaudit.certify.ReservedTestCertifier`.

    Notes
    -----
    Every scale reuses the same seed for the draws, and the noise mechanisms draw standard
    noise and then scale it, so the scales share common random numbers: differences along
    ``scale`` come from the scale, not from resampling. Each scale's certificate is its own
    family: with probability at least 1 − α all of *that scale's* certified pairs are at most
    their truth. Over k scales the chance that some family fails is at most k·α (union bound;
    the scales share their random numbers, so they are not independent). For one guarantee
    over the whole sweep, pass a certifier with ``n_families=k``.

    For the pure-DP lower-bound routes (MMD-TV, the δ = 0 certificate) the truth to compare
    with is the pure ε, finite only for ``"laplace"``; under ``"gaussian"`` it is infinite and
    ``true_epsilon`` at δ > 0 is what GaussMech's δ and a δ > 0 certificate refer to.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, MMDTVAuditor
    >>> from idaudit.benchmark import noise_sweep
    >>> base = EmbeddingSet(np.random.default_rng(0).normal(size=(8, 4)), np.arange(8))
    >>> ds = noise_sweep(base, [0.1, 1.0], mechanism="laplace", n_pairs=6, n_per_identity=40,
    ...                  auditors=[MMDTVAuditor()], progress=False)
    >>> dict(ds["mmdtv_epsilon"].sizes)
    {'scale': 2, 'pair': 6}
    >>> bool((ds["certified_epsilon"] <= ds["true_epsilon"]).where(
    ...     ds["certified_epsilon"].notnull(), True).all())
    True
    """
    from idaudit.audits import (
        GaussMechAuditor,
        KDELRAuditor,
        MMDTVAuditor,
        ROCHTAuditor,
        audit_pairs,
    )
    from idaudit.certify import ReservedTestCertifier

    if not isinstance(base, EmbeddingSet):
        raise TypeError(f"`base` must be an idaudit.EmbeddingSet; got {type(base).__name__}.")
    kind = check_option(mechanism, "mechanism", ("gaussian", "laplace"))
    scale_values = _check_scales(scales)
    n_pairs = _check_n_pairs(n_pairs, len(base.identities))
    n_per_identity = check_integer(n_per_identity, "n_per_identity", minimum=2)
    make = GaussianNoise if kind == "gaussian" else LaplaceNoise
    if delta is None:
        delta = make.default_delta
    delta = check_in_range(delta, "delta", 0.0, 1.0, closed="left")
    _check_certification(certify, certifier, sequential, delta)

    seed_pairs, seed_draws, seed_audit, seed_cert = spawn_seeds(check_random_state(rng), 4)
    pairs = sample_pairs(base.identities, n_pairs, rng=seed_pairs)
    needed = list(dict.fromkeys(label for pair in pairs for label in pair))
    if auditors is None:
        auditors = [
            GaussMechAuditor(),
            KDELRAuditor(),
            MMDTVAuditor(),
            ROCHTAuditor(rng=seed_audit),
        ]
    if certify and certifier is None:
        certifier = ReservedTestCertifier(
            n_candidates=n_pairs,
            n_select=min(5, _always_selectable(pairs)),
            delta=delta,
            rng=seed_cert,
            progress=False,
        )

    per_scale: list[xr.Dataset] = []
    cert_attrs: dict[str, Any] = {}
    for scale in tqdm(scale_values, desc=f"noise_sweep ({kind})", disable=not progress):
        mech = make(base, scale)
        es = sample_embeddings(mech, n_per_identity, needed, rng=seed_draws)
        ds = audit_pairs(es, pairs, list(auditors), device=device, progress=False)
        ds = add_guarantee(ds, mech, delta)
        if certify:
            cert = clone(certifier).fit(es, pairs)
            ds = _attach_certificate(ds, cert.certificates_, mech)
            cert_attrs = _certifier_attrs(cert.certificates_)
        if sequential is not None:
            ds = _attach_sequential(ds, clone(sequential).set_params(mechanism=mech, pairs=pairs))
        per_scale.append(ds)

    out = _stack_scales(per_scale, scale_values, kind)
    exact = bool(np.asarray(out["true_epsilon_exact"].values).all())
    out.attrs.update(
        {
            **provenance(
                title="calibrated noise sweep (idaudit.benchmark.noise_sweep)",
                inputs={"base_sha256": str(base.sha256)},
                settings={"device": str(device)},
            ),
            "benchmark": "calibrated noise sweep (seed 000, Section 5.2)",
            "mechanism": kind,
            "scale_name": _SCALE_NAMES[kind],
            "reference_delta": delta,
            "truth_kind": "exact" if exact else "upper_bound",
            "n_pairs": n_pairs,
            "n_per_identity": n_per_identity,
            "n_identities": len(base.identities),
            "dim": int(base.dim),
            "rng": int(rng) if isinstance(rng, numbers.Integral) else type(rng).__name__,
            **cert_attrs,
        }
    )
    out.attrs.pop("draw_rng", None)
    return out


def _check_n_pairs(value: Any, n_ids: int) -> int:
    """Return ``n_pairs`` as ``int`` after checking it is at most the pairs of ``n_ids`` ids."""
    n_pairs = check_integer(value, "n_pairs", minimum=1)
    n_available = n_ids * (n_ids - 1) // 2
    if n_pairs > n_available:
        raise InvalidInputError(
            f"`n_pairs` must be at most the number of unordered pairs, {n_available} for "
            f"{n_ids} identities; got {n_pairs}."
        )
    return n_pairs


def _check_certification(certify: Any, certifier: Any, sequential: Any, delta: float) -> None:
    """Check ``certify``, and the certifier and sequential template against the sweep's δ."""
    if not isinstance(certify, bool):
        raise TypeError(f"`certify` must be a bool; got {type(certify).__name__}.")
    if certifier is not None:
        if not certify:
            raise InvalidInputError(
                "`certifier` is given but `certify` is False; drop one of them."
            )
        _check_certifier(certifier, delta)
    if sequential is not None:
        _check_sequential(sequential, delta)


def _certifier_attrs(certificates: xr.Dataset) -> dict[str, Any]:
    """Return the certifier's settings among the certificates' attrs as ``certifier.<name>``."""
    return {
        f"certifier.{k}": v
        for k, v in certificates.attrs.items()
        if k in ("alpha", "alpha_per_bound", "n_select", "n_families", "delta", "classifier")
    }


def _stack_scales(
    per_scale: list[xr.Dataset], scale_values: npt.NDArray[np.float64], kind: str
) -> xr.Dataset:
    """Concatenate the per-scale Datasets along ``scale`` and add the ``noise_sd`` coordinate."""
    out = xr.concat(
        per_scale,
        dim=pd.Index(scale_values, name="scale"),
        data_vars="all",
        coords="minimal",
        compat="override",
        join="override",
        combine_attrs="drop_conflicts",
    )
    sd = scale_values * (np.sqrt(2.0) if kind == "laplace" else 1.0)
    out = out.assign_coords(noise_sd=("scale", sd, {"long_name": "per-coordinate noise sd"}))
    out["scale"].attrs["long_name"] = _SCALE_NAMES[kind]
    return out


def _check_scales(scales: Any) -> npt.NDArray[np.float64]:
    try:
        values = np.asarray(scales, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`scales` must be a sequence of numbers; got {scales!r}.") from exc
    if values.size == 0:
        raise InvalidInputError("`scales` must hold at least one scale; got none.")
    bad = ~(np.isfinite(values) & (values > 0))
    if bad.any():
        raise InvalidInputError(
            f"`scales` must be positive and finite; got {float(values[bad][0])!r}."
        )
    if np.unique(values).size != values.size:
        raise InvalidInputError(f"`scales` must be distinct; got {values.tolist()!r}.")
    return values


def _check_certifier(certifier: Any, delta: float) -> None:
    """Check the certifier's type and that it certifies at the δ ``true_epsilon`` is stated at."""
    from idaudit.certify import ReservedTestCertifier

    if not isinstance(certifier, ReservedTestCertifier):
        raise TypeError(
            "`certifier` must be an idaudit.certify.ReservedTestCertifier; "
            f"got {type(certifier).__name__}."
        )
    cert_delta = certifier.delta
    if isinstance(cert_delta, numbers.Real) and float(cert_delta) != delta:
        raise InvalidInputError(
            f"`certifier.delta` must equal the sweep's `delta`, at which `true_epsilon` is "
            f"stated; got certifier.delta={float(cert_delta)!r} and delta={delta!r}. Pass "
            f"delta={float(cert_delta)!r} to state the truth at the certifier's δ, or build "
            f"the certifier with delta={delta!r}."
        )


def _check_sequential(sequential: Any, delta: float) -> None:
    """Check the sequential template's type and that it certifies at the sweep's δ."""
    from idaudit.certify import SequentialCertifier

    if not isinstance(sequential, SequentialCertifier):
        raise TypeError(
            "`sequential` must be an idaudit.certify.SequentialCertifier; "
            f"got {type(sequential).__name__}."
        )
    if isinstance(sequential.delta, numbers.Real) and float(sequential.delta) != delta:
        raise InvalidInputError(
            f"`sequential.delta` must equal the sweep's `delta`, at which `true_epsilon` is "
            f"stated; got sequential.delta={float(sequential.delta)!r} and delta={delta!r}."
        )


def _attach_sequential(ds: xr.Dataset, cert: SequentialCertifier) -> xr.Dataset:
    """Run the sequential certificate on the audited pairs and attach it (same pair order)."""
    cert.fit()
    per_pair = cert.certificates_["epsilon_lb"]
    return ds.assign(
        sequential_epsilon=variable(
            "pair",
            per_pair.values,
            long_name="anytime-valid sequential certified lower bound (own draws)",
            **reduction_attrs(per_pair.attrs, 1),
        ),
        sequential_epsilon_max=variable(
            (),
            cert.epsilon_lb_,
            long_name="largest sequential certified bound",
            **reduction_attrs(per_pair.attrs, per_pair.sizes["pair"]),
        ),
        sequential_n_used=variable(
            (),
            cert.n_used_,
            long_name="outputs drawn per identity by the sequential certificate",
            status="descriptive",
        ),
    )


def _always_selectable(pairs: Sequence[tuple[Any, Any]]) -> int:
    """Count vertex-disjoint pairs that greedy selection finds whatever the ranking.

    Every maximal matching has at least half as many edges as a maximum one, which has at
    least as many as the greedy matching in list order: ceil(m / 2) is always reachable.
    """
    used: set[Any] = set()
    m = 0
    for a, b in pairs:
        if a not in used and b not in used:
            used.update((a, b))
            m += 1
    return max(1, (m + 1) // 2)


def _attach_certificate(ds: xr.Dataset, certificates: xr.Dataset, mech: Any) -> xr.Dataset:
    """Map the selected pairs' certified bounds onto the audited pair list (NaN elsewhere).

    Also the certified ε(δ) curve (the largest over the certified pairs at each δ) and, beside
    it, the truth it refers to: the largest true ε(δ) of those pairs.
    """
    index = {
        (a, b): i
        for i, (a, b) in enumerate(
            zip(ds["identity_a"].values.tolist(), ds["identity_b"].values.tolist(), strict=False)
        )
    }
    values = np.full(ds.sizes["pair"], np.nan)
    for a, b, eps in zip(
        certificates["identity_a"].values.tolist(),
        certificates["identity_b"].values.tolist(),
        certificates["epsilon_lb"].values.tolist(),
        strict=False,
    ):
        values[index[(a, b)]] = eps
    per_pair = certificates["epsilon_lb"]
    curve = certificates["epsilon_lb_curve"]
    deltas = certificates["delta"].values
    certified_pairs = list(
        zip(
            certificates["identity_a"].values.tolist(),
            certificates["identity_b"].values.tolist(),
            strict=True,
        )
    )
    truth = [
        max((float(mech.pair_epsilon(a, b, float(d))) for a, b in certified_pairs), default=0.0)
        for d in deltas
    ]
    ds = ds.assign_coords(delta=("delta", deltas, {"long_name": "delta of the epsilon curves"}))
    return ds.assign(
        certified_epsilon_curve=variable(
            "delta",
            curve.max("pair").values if curve.sizes["pair"] else np.zeros(deltas.size),
            long_name="largest certified lower bound at each delta (all deltas at once)",
            **reduction_attrs(curve.attrs, max(curve.sizes["pair"], 1)),
        ),
        true_epsilon_curve=variable(
            "delta",
            np.asarray(truth),
            long_name="largest true epsilon(delta) of the certified pairs (exact where "
            "true_epsilon_curve_exact, else an upper bound)",
            status="reference",
        ),
        true_epsilon_curve_exact=variable(
            "delta",
            [all(mech.is_exact(a, b, float(d)) for a, b in certified_pairs) for d in deltas],
            long_name="whether true_epsilon_curve is exact at this delta",
            status="descriptive",
        ),
        certified_epsilon=variable(
            "pair",
            values,
            long_name="reserved-test certified lower bound (selected pairs; NaN elsewhere)",
            **reduction_attrs(per_pair.attrs, 1),
        ),
        certified_epsilon_max=variable(
            (),
            float(certificates.attrs["epsilon_lb"]),
            long_name="largest certified lower bound",
            **reduction_attrs(per_pair.attrs, max(per_pair.sizes["pair"], 1)),
        ),
    )
