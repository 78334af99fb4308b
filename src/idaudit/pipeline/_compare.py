"""Several generators audited on the identities and pairs common to all: ``compare_conditions``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr

import idaudit._device as _device
from idaudit._results import attr_value, provenance
from idaudit._validation import RngLike
from idaudit.exceptions import InvalidInputError
from idaudit.pipeline._audit import (
    GeneratorEmbeddings,
    _audit_settings,
    _choose_pairs,
    _draw_settings,
    _encode,
    _face_pipeline,
    _min_rows_for,
    _seed_and_auditors,
    _with_lost,
)
from idaudit.pipeline._settings import AuditSettings, DrawSettings

if TYPE_CHECKING:
    from idaudit.faces import EmbeddingCache, Face, FaceModelOptions, FacePipeline
    from idaudit.pipeline._linkage import LinkageReport

__all__ = ["ConditionComparison", "compare_conditions"]


@dataclass(frozen=True)
class ConditionComparison:
    """What :func:`compare_conditions` returns.

    Attributes
    ----------
    results : xarray.Dataset
        Dims ``(condition, pair)``: every condition audited on the same pairs of the
        identities kept in all conditions.
    lost : pandas.DataFrame
        Draws without a usable row, identity × condition.
    embeddings : dict of str to GeneratorEmbeddings
        Per condition.
    certificates : dict of str to xarray.Dataset
        Per condition, when a certifier was given.
    linkage : pandas.DataFrame or None
        One row per condition: re-identification against the ``reference`` condition.
    identities : tuple
        The identities common to all conditions.
    """

    results: xr.Dataset
    lost: pd.DataFrame
    embeddings: dict[str, GeneratorEmbeddings]
    certificates: dict[str, xr.Dataset]
    linkage: pd.DataFrame | None
    identities: tuple[Any, ...]
    linkage_reports: dict[str, LinkageReport] = field(default_factory=dict, repr=False)


def compare_conditions(
    conditions: Mapping[str, Callable[..., Any]],
    images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]],
    *,
    models: FaceModelOptions | FacePipeline | None = None,
    draws: DrawSettings | None = None,
    audit: AuditSettings | None = None,
    cache: EmbeddingCache | str | os.PathLike[str] | None = None,
    rng: RngLike = 0,
    progress: bool = True,
) -> ConditionComparison:
    """Audit several generators (conditions) on the identities and pairs common to all.

    Each condition is encoded with :func:`encode_generator` (same sources, same seeds, one
    shared pipeline and cache; in paired mode the originals are detected once). Identities
    kept in every condition are then audited on one shared list of pairs, so the conditions
    are compared on exactly the same identities and pairs, and the faces each condition lost
    are tabulated per identity.

    Parameters
    ----------
    conditions : mapping of name to callable
        The generators, e.g. ``{"none": lambda im: im, "blur 3": GaussianBlur(3)}``.
    images_by_identity, models, cache, rng, progress
        As in :func:`audit_generator`.
    draws : DrawSettings, optional
        As in :func:`audit_generator`; default ``DrawSettings(mode="paired")``. The failed
        draws are tabulated in ``lost`` (and not warned about per condition).
    audit : AuditSettings, optional
        As in :func:`audit_generator`, with ``pairs`` an int or ``"all"`` (sampled, seeded,
        among the common identities), no controls, and ``reference``: a condition (usually
        the identity map, "no anonymisation") against which every condition's
        re-identification is reported (:func:`linkage_report`). The ``certifier`` is cloned
        and fitted per condition on the common pairs, with ``n_families`` raised to the
        number of conditions (kept when larger): the conditions are one family, so every
        certificate of every condition holds jointly at the certifier's ``alpha``, and the
        tables, maxima and plots over conditions keep the certified status
        (docs/status.md, rule 2). Each bound is then taken at α / (n_conditions ·
        n_select · 2), which lowers every certificate a little.

    Returns
    -------
    ConditionComparison

    Examples
    --------
    >>> from idaudit.pipeline import compare_conditions  # doctest: +SKIP
    """
    with _device.thread_limit(_device.default_threads()):
        from idaudit.audits import concat_conditions

        settings = _audit_settings(audit, compare=True)
        reference = settings.reference
        if not isinstance(conditions, Mapping) or not conditions:
            raise InvalidInputError(
                "`conditions` must be a non-empty mapping of name -> generator."
            )
        if reference is not None and reference not in conditions:
            raise InvalidInputError(
                f"`reference` must name one of the conditions {list(conditions)}; "
                f"got {reference!r}."
            )
        seed, auditor_list = _seed_and_auditors(rng, settings)
        certifier = _one_family(settings.certifier, len(conditions))
        plan = _draw_settings(
            DrawSettings(mode="paired") if draws is None else draws,
            _min_rows_for(auditor_list, certifier),
        )
        need = plan.min_rows
        coded = _encode_conditions(
            conditions, images_by_identity, _face_pipeline(models), plan, cache, rng, progress
        )
        names = list(coded)
        common = [
            k
            for k in coded[names[0]].counts.index
            if all(not bool(coded[c].counts.loc[k, "excluded"]) for c in names)
        ]
        if len(common) < 2:
            raise InvalidInputError(
                f"only {len(common)} {'identity has' if len(common) == 1 else 'identities have'} "
                f"min_rows={need} usable outputs in every condition; at least 2 are needed."
            )
        pair_list, _ = _choose_pairs(common, settings.pairs, (), seed, stacklevel=3)
        results: dict[str, xr.Dataset] = {}
        certs: dict[str, xr.Dataset] = {}
        for name in names:
            results[name], cert = _audit_condition(
                coded[name], common, pair_list, auditor_list, certifier, settings.device, progress
            )
            if cert is not None:
                certs[name] = cert
        stacked = concat_conditions(dict(results.items()))  # type: ignore[arg-type, unused-ignore]
        stacked.attrs.update(
            provenance(title="idaudit.pipeline.compare_conditions", seeds={"pairs": seed})
        )
        stacked.attrs["n_common_identities"] = len(common)
        lost = pd.DataFrame({name: coded[name].counts["n_lost"] for name in names})
        lost.index.name = "identity"
        linkage, reports = _linkage_table(coded, reference, common)
        return ConditionComparison(stacked, lost, coded, certs, linkage, tuple(common), reports)


def _one_family(certifier: Any, n_conditions: int) -> Any:
    """Return the certifier with ``n_families`` raised to the number of conditions.

    Every condition's certificate is read beside the others (a table, a maximum, a ranking),
    so they must hold jointly: a family of ``n_conditions`` pays for them (Bonferroni), and
    the statuses of the cross-condition reducers stay certified. A larger ``n_families``
    (the comparison is part of a bigger family) is kept.
    """
    if certifier is None or "n_families" not in certifier.get_params():
        return certifier
    from sklearn.base import clone

    if int(certifier.n_families) >= n_conditions:
        return certifier
    return clone(certifier).set_params(n_families=n_conditions)


def _encode_conditions(
    conditions: Mapping[str, Callable[..., Any]],
    images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]],
    pipeline: FacePipeline,
    plan: DrawSettings,
    cache: EmbeddingCache | str | os.PathLike[str] | None,
    rng: RngLike,
    progress: bool,
) -> dict[str, GeneratorEmbeddings]:
    """Encode every condition with the same sources, seeds, pipeline and cache.

    One mapping of original detections is shared by all conditions, so in paired mode each
    original is detected once.
    """
    original_faces: dict[tuple[Any, int], Face | None] = {}
    coded: dict[str, GeneratorEmbeddings] = {}
    for name, gen in conditions.items():
        with warnings.catch_warnings():
            # exclusions and failed draws are reported per condition in the `lost` table
            # and the result
            warnings.filterwarnings("ignore", message=".*left with fewer than min_rows")
            warnings.filterwarnings("ignore", message=".*draws of the kept identities")
            coded[name] = _encode(
                gen,
                images_by_identity,
                pipeline,
                plan,
                cache,
                rng,
                original_faces,
                f"{name}: identities" if progress else None,
            )
    return coded


def _audit_condition(
    coded: GeneratorEmbeddings,
    common: Sequence[Any],
    pair_list: list[tuple[Any, Any]],
    auditors: Sequence[Any],
    certifier: Any,
    device: str,
    progress: bool,
) -> tuple[xr.Dataset, xr.Dataset | None]:
    """Audit one condition on the common identities and pairs; certify it if asked.

    Returns the per-pair Dataset (with ``lost_a``/``lost_b`` and the condition's attrs) and
    the certifier's ``certificates_`` (``None`` without a certifier).
    """
    from sklearn.base import clone

    from idaudit.audits import audit_pairs

    es = coded.embeddings.subset(common)
    ds = audit_pairs(es, pair_list, [clone(a) for a in auditors], device=device, progress=progress)
    ds = _with_lost(ds, coded.counts, pair_list)
    ds.attrs.update({k: attr_value(v) for k, v in coded.attrs.items()})
    cert = None if certifier is None else clone(certifier).fit(es, pair_list).certificates_
    return ds, cert


def _linkage_table(
    coded: Mapping[str, GeneratorEmbeddings], reference: str | None, common: Sequence[Any]
) -> tuple[pd.DataFrame | None, dict[str, LinkageReport]]:
    """Re-identification of every condition against ``reference`` (none without one)."""
    from idaudit.pipeline._linkage import linkage_report

    reports: dict[str, LinkageReport] = {}
    if reference is None:
        return None, reports
    for name in coded:
        reports[name] = linkage_report(coded[reference], coded[name], identities=common)
    linkage = pd.DataFrame({n: r.to_dict() for n, r in reports.items()}).T
    linkage.index.name = "condition"
    return linkage, reports
