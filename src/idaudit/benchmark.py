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
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr
from sklearn.base import clone
from tqdm.auto import tqdm

from idaudit._eigenfaces import EigenfaceEncoder
from idaudit._results import Status, provenance, reduction_attrs, variable
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
    from idaudit.faces import FacePipeline
    from idaudit.pipeline import FaceBank

__all__ = ["EigenfaceEncoder", "noise_sweep", "private_swap_sweep"]

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
        pairs, NaN elsewhere), ``certified_epsilon_max`` and ``certified_ceiling`` (scale:
        the largest certificate and the largest zero-error ceiling); with ``sequential``, the
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
        certifier = _default_certifier(pairs, delta, seed_cert)  # pairs holds n_pairs pairs

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


def _check_scales(scales: Any, name: str = "scales") -> npt.NDArray[np.float64]:
    try:
        values = np.asarray(scales, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be a sequence of numbers; got {scales!r}.") from exc
    if values.size == 0:
        raise InvalidInputError(f"`{name}` must hold at least one value; got none.")
    bad = ~(np.isfinite(values) & (values > 0))
    if bad.any():
        raise InvalidInputError(
            f"`{name}` must be positive and finite; got {float(values[bad][0])!r}."
        )
    if np.unique(values).size != values.size:
        raise InvalidInputError(f"`{name}` must be distinct; got {values.tolist()!r}.")
    return values


def _check_certifier(certifier: Any, delta: float) -> None:
    """Check the certifier's type and that it certifies at the δ ``true_epsilon`` is stated at."""
    from idaudit.certify import ReservedTestCertifier

    if not isinstance(certifier, ReservedTestCertifier):
        raise TypeError(
            "`certifier` must be an idaudit.certify.ReservedTestCertifier; "
            f"got {type(certifier).__name__}."
        )
    cert_delta: object = certifier.delta  # unchecked until fit
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
    seq_delta: object = sequential.delta  # unchecked until fit
    if isinstance(seq_delta, numbers.Real) and float(seq_delta) != delta:
        raise InvalidInputError(
            f"`sequential.delta` must equal the sweep's `delta`, at which `true_epsilon` is "
            f"stated; got sequential.delta={float(seq_delta)!r} and delta={delta!r}."
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


def _default_certifier(
    pairs: Sequence[tuple[Any, Any]], delta: float, seed: Any
) -> ReservedTestCertifier:
    """Return the sweeps' default certifier: every pair a candidate, ``min(5, k)`` selected.

    k: the vertex-disjoint pairs greedy selection finds in any rank order.
    """
    from idaudit.certify import ReservedTestCertifier

    return ReservedTestCertifier(
        n_candidates=len(pairs),
        n_select=min(5, _always_selectable(pairs)),
        delta=delta,
        rng=seed,
        progress=False,
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
        certified_ceiling=variable(
            (),
            float(certificates["epsilon_lb_ceiling"].max())
            if "epsilon_lb_ceiling" in certificates and certificates.sizes["pair"]
            else np.nan,
            long_name="largest zero-error ceiling of the certified pairs (what an error-free "
            "test certifies at their test sizes)",
            status="descriptive",
        ),
    )


def private_swap_sweep(
    images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]],
    sigmas: Sequence[float] | npt.NDArray[np.float64],
    *,
    bank: FaceBank,
    pipeline: FacePipeline,
    pairs: Sequence[tuple[Any, Any]],
    audit_pipeline: FacePipeline | None = None,
    repeats: int = 40,
    delta: float = 1e-5,
    auditors: Sequence[BaseAuditor] | None = None,
    certifier: ReservedTestCertifier | None = None,
    cache: Any = None,
    rng: RngLike = 0,
    progress: bool = True,
) -> xr.Dataset:
    r"""Audit :class:`~idaudit.pipeline.EmbeddingNoiseSwap` from pixels against its proof.

    At every σ the mechanism turns each identity's source images into faces ``repeats`` times,
    :func:`~idaudit.pipeline.audit_generator` finds, aligns and encodes the faces in the outputs
    (with ``audit_pipeline``: the auditor's own detector and encoder) and runs the four routes
    and the reserved-test certificate on ``pairs``; each pair's proved guarantee is set beside.

    Parameters
    ----------
    images_by_identity : mapping of label to sequence of (H, W, 3) uint8 images
        Source images of each identity; only the identities in ``pairs`` go through the
        mechanism.
    sigmas : sequence of float
        Noise standard deviations, each > 0 and finite, distinct; sorted ascending in the
        result.
    bank : FaceBank
        The mechanism's public faces.
    pipeline : FacePipeline
        The mechanism's detector and encoder (the one inside the proof).
    pairs : sequence of (label, label)
        Pairs audited, fixed before any output is seen (the certificate's assumption).
    audit_pipeline : FacePipeline, optional
        The auditor's detector and encoder; default ``pipeline``. Another encoder audits the
        identity channel as a third party would see it.
    repeats : int, default 40
        Outputs per source image and σ.
    delta : float, default 1e-5
        δ of the guarantee and of the certificate, in (0, 1).
    auditors : sequence of BaseAuditor, optional
        Default: the four routes of :func:`~idaudit.pipeline.audit_generator`.
    certifier : ReservedTestCertifier, optional
        Its ``delta`` must equal ``delta``. Default: ``n_candidates = len(pairs)``, as many
        disjoint pairs as greedy selection always finds (at most 5), ``rng`` from ``rng``.
    cache : EmbeddingCache or path, optional
        Passed to :func:`~idaudit.pipeline.audit_generator` (outputs are bank faces, which
        repeat: a cache encodes each once).
    rng : int, SeedSequence or Generator, default 0
    progress : bool, default True

    Returns
    -------
    xarray.Dataset
        Dims ``sigma`` and ``pair`` (coords ``identity_a``, ``identity_b``), ``route``.
        ``<route>_epsilon`` (sigma, pair) with the route's status; ``certified_epsilon``
        (``certified_lower_bound``; NaN for pairs not selected; each σ certified as its own
        family, its ``n_simultaneous`` pairs jointly) and ``certified_ceiling``
        (the most the test split could certify); ``guarantee_epsilon`` (sigma, pair) and
        ``global_guarantee_epsilon`` (sigma), ``certified_upper_bound``; ``pair_sensitivity``
        (pair); ``n_exceed`` (sigma): certified pairs above their guarantee, which a sound
        audit keeps at 0 but with probability α; ``tightness`` (sigma, pair): certified /
        guarantee; ``rank_correlation`` (route): Spearman's ρ over σ between the route's median
        over pairs and the median guarantee (NaN when either is constant or fewer than 3 σ
        are finite); ``endpoint_regime`` (route): ``"never"`` when no value is at an
        endpoint (+∞; for the certificate: at its ceiling) at any σ, ``"leaves"`` when the
        route is at one up to some σ and not from the next on, ``"stays"`` when it is at one at
        the largest σ; ``leaves_endpoint_sigma`` (route): for ``"leaves"`` the smallest σ from
        which on no value is at an endpoint, NaN otherwise; ``not_run`` (route): (σ, pair)
        values the route could not compute (NaN; kept apart from endpoints, and 0 for the
        certificate, whose NaN only marks a pair not selected).
    """
    from scipy.stats import spearmanr

    from idaudit.audits import (
        GaussMechAuditor,
        KDELRAuditor,
        MMDTVAuditor,
        ROCHTAuditor,
        audit_pairs,
    )
    from idaudit.certify import ReservedTestCertifier
    from idaudit.pipeline import AuditSettings, DrawSettings, EmbeddingNoiseSwap, audit_generator

    sig = np.sort(_check_scales(sigmas, "sigmas"))
    dlt = check_in_range(delta, "delta", 0.0, 1.0)
    pair_list = [(a, b) for a, b in pairs]
    if not pair_list:
        raise InvalidInputError("`pairs` must hold at least one (label, label) pair; got none.")
    missing = sorted({str(x) for p in pair_list for x in p if x not in images_by_identity})
    if missing:
        raise InvalidInputError(f"`pairs` name identities without images: {', '.join(missing)}.")
    if certifier is not None and float(certifier.delta) != dlt:
        raise InvalidInputError(
            f"`certifier.delta` must equal `delta` {dlt!r}; got {certifier.delta!r}."
        )
    seed_run, seed_cert = spawn_seeds(check_random_state(rng), 2)
    if certifier is None:
        certifier = _default_certifier(pair_list, dlt, seed_cert)
    probe = EmbeddingNoiseSwap(float(sig[0]), bank=bank, pipeline=pipeline)
    audited = {k: list(images_by_identity[k]) for p in pair_list for k in p}  # pairs' only
    sources = {k: probe.encode_sources(images) for k, images in audited.items()}
    n_p = len(pair_list)
    route_list = (  # audit_generator's four routes
        list(auditors)
        if auditors is not None
        else [GaussMechAuditor(), KDELRAuditor(mix=0.0), MMDTVAuditor(), ROCHTAuditor(rng=seed_run)]
    )
    route_eps: dict[str, npt.NDArray[np.float64]] = {}
    failures: list[str] = []
    route_status: dict[str, Any] = {}
    cert = np.full((sig.size, n_p), np.nan)
    ceiling = np.full((sig.size, n_p), np.nan)
    guar = np.zeros((sig.size, n_p))
    global_guar = np.zeros(sig.size)
    sens = np.zeros(n_p)
    index = {p: i for i, p in enumerate(pair_list)}
    n_joint = 1
    for s, sigma in enumerate(tqdm(sig, desc="private swap sweep", disable=not progress)):
        mech = probe.with_sigma(float(sigma))  # source embeddings are encoded once
        for i, (a, b) in enumerate(pair_list):
            g = mech.pair_guarantee(sources[a], sources[b], dlt)
            guar[s, i], sens[i] = g.epsilon, g.sensitivity
        global_guar[s] = mech.guarantee(dlt).epsilon
        with warnings.catch_warnings():
            # the outputs are bank faces: repeated rows are iid draws of a discrete law, which
            # the certifier's default duplicates="keep" counts as such
            warnings.filterwarnings("ignore", message=r".*usable output row\(s\) repeat")
            warnings.filterwarnings("ignore", message=r".*exact duplicates of an earlier row")
            run = audit_generator(
                mech,
                audited,
                models=audit_pipeline if audit_pipeline is not None else pipeline,
                cache=cache,
                rng=seed_run,
                progress=False,
                draws=DrawSettings(repeats=repeats),
                audit=AuditSettings(pairs=pair_list, auditors=route_list[:1], certifier=certifier),
            )
        es = run.embeddings.embeddings
        kept = list(
            zip(
                run.results["identity_a"].values.tolist(),
                run.results["identity_b"].values.tolist(),
                strict=True,
            )
        )
        for aud in route_list:  # one at a time: a route that cannot run is NaN, not a crash
            name = f"{aud.label}_epsilon"
            try:
                res = audit_pairs(es, kept, [aud], progress=False)
            except InvalidInputError as exc:
                failures.append(f"sigma={float(sigma):g} {aud.label}: {exc}")
                continue
            route_status[aud.label] = res[name].attrs["status"]
            for j, (a, b) in enumerate(kept):
                i = index[(a, b)] if (a, b) in index else index[(b, a)]
                route_eps.setdefault(aud.label, np.full((sig.size, n_p), np.nan))[s, i] = float(
                    res[name].values[j]
                )
        c = run.certificates
        if c is not None:
            # each σ is its own family: its certified pairs hold jointly
            n_joint = max(n_joint, int(c["epsilon_lb"].attrs.get("n_simultaneous", 1)))
            for j, (a, b) in enumerate(
                zip(c["identity_a"].values.tolist(), c["identity_b"].values.tolist(), strict=True)
            ):
                i = index[(a, b)] if (a, b) in index else index[(b, a)]
                cert[s, i] = float(c["epsilon_lb"].values[j])
                ceiling[s, i] = float(c["epsilon_lb_ceiling"].values[j])
    exceed = (np.nan_to_num(cert, nan=-np.inf) > guar).sum(axis=1)
    routes = [a.label for a in route_list if a.label in route_status] + ["certified"]
    series = {r: route_eps[r] for r in routes[:-1]} | {"certified": cert}
    rho = []
    leaves = []
    regimes = []
    not_run = []
    med_guar = np.median(guar, axis=1)
    for r in routes:
        vals = series[r]
        med = np.array([np.nanmedian(v) if np.isfinite(v).any() else np.nan for v in vals])
        finite_med = np.where(np.isposinf(np.nanmax(vals, axis=1)), np.inf, med)
        ok = np.isfinite(finite_med)
        defined = ok.sum() >= 3 and np.ptp(finite_med[ok]) > 0 and np.ptp(med_guar[ok]) > 0
        # a constant series has no rank correlation (scipy warns and returns NaN)
        rho.append(float(spearmanr(finite_med[ok], med_guar[ok]).statistic) if defined else np.nan)
        if r == "certified":  # at the ceiling: limited by the test split, not the mechanism
            at_end = np.asarray((cert >= ceiling).any(axis=1), dtype=bool)
            not_run.append(0)
        else:  # an infinite value: a ROC or a density ratio at its endpoint; NaN: not run
            at_end = np.asarray(np.any(np.isposinf(vals), axis=1), dtype=bool)
            not_run.append(int(np.isnan(vals).sum()))
        if not at_end.any():
            regimes.append("never")
            leaves.append(np.nan)
        elif at_end[-1]:
            regimes.append("stays")
            leaves.append(np.nan)
        else:  # σ is sorted: the first grid point after the last one at an endpoint
            regimes.append("leaves")
            leaves.append(float(sig[int(np.flatnonzero(at_end)[-1]) + 1]))
    desc: Status = "descriptive"
    up = probe.guarantee(dlt).status
    data = {
        f"{r}_epsilon": variable(
            ("sigma", "pair"), route_eps[r], long_name=f"{r} epsilon", status=route_status[r]
        )
        for r in routes[:-1]
    }
    data |= {
        "certified_epsilon": variable(
            ("sigma", "pair"),
            cert,
            long_name="reserved-test certified lower bound (selected pairs; NaN elsewhere)",
            status=ReservedTestCertifier.status,
            n_simultaneous=n_joint,  # the pairs certified at one σ hold jointly
        ),
        "certified_ceiling": variable(
            ("sigma", "pair"),
            ceiling,
            long_name="largest bound the test split could certify (zero errors)",
            status=desc,
        ),
        "guarantee_epsilon": variable(
            ("sigma", "pair"),
            guar,
            long_name="proved pair guarantee at delta",
            status=up,
            n_simultaneous=n_p,  # proved: every pair's bound holds at once, with probability one
        ),
        "global_guarantee_epsilon": variable(
            "sigma", global_guar, long_name="proved guarantee for any two inputs", status=up
        ),
        "pair_sensitivity": variable(
            "pair", sens, long_name="max L2 distance of the pair's source embeddings", status=desc
        ),
        "n_exceed": variable(
            "sigma", exceed, long_name="certified pairs above their guarantee", status=desc
        ),
        "tightness": variable(
            ("sigma", "pair"), cert / guar, long_name="certified / guarantee", status=desc
        ),
        "rank_correlation": variable(
            "route", rho, long_name="Spearman rho over sigma with the guarantee", status=desc
        ),
        "leaves_endpoint_sigma": variable(
            "route",
            leaves,
            long_name="smallest sigma from which on no value is at an endpoint (NaN unless "
            "endpoint_regime is 'leaves')",
            status=desc,
        ),
        "endpoint_regime": variable(
            "route",
            np.asarray(regimes),
            long_name="'never' at an endpoint, 'leaves' it from leaves_endpoint_sigma, or "
            "'stays' at the largest sigma",
            status=desc,
        ),
        "not_run": variable(
            "route",
            not_run,
            long_name="(sigma, pair) values the route could not compute",
            status=desc,
        ),
    }
    out = xr.Dataset(
        data,
        coords={
            "sigma": ("sigma", sig),
            "identity_a": ("pair", [str(a) for a, _ in pair_list]),
            "identity_b": ("pair", [str(b) for _, b in pair_list]),
            "route": ("route", routes),
        },
    )
    out.attrs.update(
        {
            **provenance(title="private swap sweep (idaudit.benchmark.private_swap_sweep)"),
            "delta": dlt,
            "repeats": int(repeats),
            "mechanism_encoder": bank.encoder,
            "audit_encoder": str(getattr((audit_pipeline or pipeline).encoder, "name", "")),
            "bank_volume": bank.volume,
            "route_failures": "; ".join(failures),
        }
    )
    return out
