"""Images in, audit out: ``encode_generator`` and ``audit_generator``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr

import idaudit._device as _device
from idaudit._results import attr_value, describe, provenance, variable
from idaudit._validation import (
    RngLike,
    check_integer,
    check_random_state,
    spawn_seeds,
)
from idaudit.data import EmbeddingSet, sample_pairs
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.pipeline._draws import DRAW_STATUSES, EncodedGenerator
from idaudit.pipeline._settings import AuditSettings, DrawSettings

if TYPE_CHECKING:
    from idaudit.faces import EmbeddingCache, Face, FaceModelOptions, FacePipeline

__all__ = [
    "GeneratorAudit",
    "GeneratorEmbeddings",
    "audit_generator",
    "encode_generator",
]

_LOST = ("no_face", "generator_error", "bad_output")
#: How many excluded identities a warning names (all are counted and listed in the result).
_N_NAMED = 10
#: Encoder/detector names → the weight registry entry whose pinned digests they load.
_REGISTRY_OF = {
    "dlib-resnet-v1": "dlib",
    "dlib-resnet-v1-torch": "dlib",
    "mtcnn": "mtcnn",
    "MTCNNDetector": "mtcnn",
}


@dataclass(frozen=True)
class GeneratorEmbeddings:
    """Embeddings of one generator's outputs, with what happened to every draw.

    Attributes
    ----------
    embeddings : EmbeddingSet
        Every draw of the identities kept (``min_rows`` usable rows or more): the usable rows
        L2-normalised, and with ``failures="keep"`` each failed draw as a failed output whose
        code is its status (``failed_counts``, ``failure_codes``, ``as_outputs``); with
        ``failures="drop"`` the failed draws are dropped and counted in ``dropped_``.
    vectors : numpy.ndarray of float64, shape (n_ok, dim)
        Every usable row, kept identities or not, as the encoder returned it.
    rows : pandas.DataFrame
        One row per entry of ``vectors``: ``identity``, ``source_index``, ``draw``.
    outcomes : pandas.DataFrame
        One row per draw: ``identity``, ``source_index``, ``draw``, ``status`` (``ok``,
        ``no_face``, ``generator_error``, ``bad_output``), ``message``, ``embedding_row``,
        ``cached``.
    counts : pandas.DataFrame
        Per identity: ``n_sources``, ``n_draws``, one column per status, ``n_lost``,
        ``n_duplicate_rows`` (usable rows repeating an earlier one exactly), ``n_cached``
        and ``excluded``.
    excluded : tuple
        Identities left with fewer than ``min_rows`` usable rows (named in a warning too).
    attrs : dict
        Provenance: models, weight digests, versions, settings, input hash.
    n_encoded : int
        Crops that went through the encoder in this call (0 on a fully cached re-run).
    """

    embeddings: EmbeddingSet
    vectors: npt.NDArray[np.float64] = field(repr=False)
    rows: pd.DataFrame = field(repr=False)
    outcomes: pd.DataFrame = field(repr=False)
    counts: pd.DataFrame = field(repr=False)
    excluded: tuple[Any, ...]
    attrs: dict[str, Any] = field(repr=False)
    n_encoded: int

    @property
    def n_lost(self) -> int:
        """Draws without a usable row (no face, generator error, bad output)."""
        return int(self.counts["n_lost"].sum())


@dataclass(frozen=True)
class GeneratorAudit:
    """What :func:`audit_generator` returns.

    Attributes
    ----------
    results : xarray.Dataset
        Per-pair audits (dim ``pair``), with ``lost_a``/``lost_b`` (draws of each identity
        without a usable row) and provenance attrs.
    certificates : xarray.Dataset or None
        The certifier's ``certificates_`` (status ``certified_lower_bound``).
    controls : xarray.Dataset or None
        Split-half sanity controls (:func:`idaudit.certify.sanity_controls`).
    embeddings : GeneratorEmbeddings
        The rows audited and the per-draw outcomes and per-identity counts.
    dropped_pairs : tuple of (label, label)
        Requested pairs that involve an excluded identity.
    """

    results: xr.Dataset
    certificates: xr.Dataset | None
    controls: xr.Dataset | None
    embeddings: GeneratorEmbeddings
    dropped_pairs: tuple[tuple[Any, Any], ...] = ()

    def pair_table(self) -> pd.DataFrame:
        """One row per pair: every per-pair variable (per-dimension ones left out)."""
        from idaudit._results import pair_frame

        return pair_frame(self.results)

    def to_markdown(self) -> str:
        """Return a markdown report of the audit: what the numbers say and how sure they are.

        Returns
        -------
        str
            The report of :func:`idaudit.pipeline.report.audit_document`: a *Verdict* (at
            most six bullets, each with its status word; certificates only as "at least"
            statements), *Warnings*, the audit table (MMD-TV and ROC AUC medians with 95 %
            intervals, each column's status, flagged columns), the certificates beside their
            ceilings, then what each column answers, the ceiling, the controls (when run),
            the statuses, and *Lost faces* (draws without a usable row, per identity).

        Notes
        -----
        Nothing is recomputed except the summary's medians; the numbers are those of
        ``results``, ``certificates`` and ``controls``.

        Examples
        --------
        >>> text = run.to_markdown()  # doctest: +SKIP
        >>> print(text.splitlines()[0])  # doctest: +SKIP
        # idaudit audit_generator
        """
        from idaudit._markdown import table
        from idaudit.pipeline.report import audit_document

        name = str(self.results.attrs.get("generator", ""))
        # filed under the key the report reads the results by (their condition, "" for one
        # run), so that each warning is read against these certificates
        key = str(self.results.attrs.get("condition", ""))
        certs = {key: self.certificates} if self.certificates is not None else None
        context = [f"Generator `{name}`." + _pairs_asked(self.results), ""]
        lines: list[str] = []
        counts = self.embeddings.counts
        lost_cols = [s for s in _LOST if s in counts.columns]
        lines += [
            "## Lost faces",
            "",
            f"{self.embeddings.n_lost} of {int(counts['n_draws'].sum())} draws have no usable "
            "row (" + ", ".join(f"{s}: {int(counts[s].sum())}" for s in lost_cols) + "). "
            "A lost face is an output of the pipeline: the certificate counts it as one, the "
            "estimates report the per-identity rates.",
            "",
        ]
        lost = counts[counts["n_lost"] > 0]
        if len(lost):
            lines += [
                table(
                    ["identity", "draws", "lost"],
                    [[label, int(r["n_draws"]), int(r["n_lost"])] for label, r in lost.iterrows()],
                )
            ]
        if self.embeddings.excluded:
            lines += [
                f"Excluded (too few usable rows): {', '.join(map(str, self.embeddings.excluded))}.",
                "",
            ]
        if self.dropped_pairs:
            lines += [f"Pairs dropped with them: {len(self.dropped_pairs)}.", ""]
        try:
            return audit_document(
                self.results,
                certs,
                title="# idaudit audit_generator",
                context=context,
                extra=lines,
                controls=self.controls,
            )
        except InvalidInputError as err:  # e.g. no pair with every epsilon
            return "\n".join(
                ["# idaudit audit_generator", "", f"No audit summary: {err}", "", *lines]
            )


def _pairs_asked(results: xr.Dataset) -> str:
    """Return a sentence when ``pairs=n`` asked for more pairs than the identities have."""
    asked = results.attrs.get("n_pairs_requested")
    n = int(results.sizes["pair"])
    if asked is None or int(asked) <= n:
        return ""
    return f" All {n} pairs of the identities were audited (`pairs={int(asked)}` asked for more)."


def _seed_and_auditors(rng: RngLike, settings: AuditSettings) -> tuple[int, list[Any]]:
    """Draw the workflow's seed from ``rng``; the auditors asked for, or the four defaults."""
    seed = int(check_random_state(rng).integers(0, 2**31 - 1))
    auditors = _default_auditors(seed) if settings.auditors is None else settings.auditors
    return seed, list(auditors)


def _face_pipeline(models: FaceModelOptions | FacePipeline | None) -> FacePipeline:
    """Return the detector and encoder ``models`` names (default: MTCNN and dlib's ResNet)."""
    from idaudit.faces import FaceModelOptions, FacePipeline, build_face_models

    if models is not None and not isinstance(models, FaceModelOptions):
        if not (hasattr(models, "detector") and hasattr(models, "encoder")):
            raise TypeError(
                "`models` must be a FaceModelOptions or a FacePipeline; got "
                f"{type(models).__name__}."
            )
        return models
    built = build_face_models(FaceModelOptions() if models is None else models)
    return FacePipeline(built.detector, built.encoders[0], progress=False)


def _audit_settings(audit: AuditSettings | None, *, compare: bool) -> AuditSettings:
    """``audit`` (default ``AuditSettings()``), refusing a field the workflow does not use."""
    if audit is None:
        return AuditSettings()
    if not isinstance(audit, AuditSettings):
        raise TypeError(f"`audit` must be an AuditSettings; got {type(audit).__name__}.")
    if compare and audit.controls:
        raise InvalidInputError("`controls` is for audit_generator; compare_conditions runs none.")
    if not compare and audit.reference is not None:
        raise InvalidInputError(
            "`reference` names a condition of compare_conditions; audit_generator has one "
            f"generator; got {audit.reference!r}."
        )
    return audit


def _draw_settings(draws: DrawSettings | None, min_rows: int) -> DrawSettings:
    """``draws`` (default ``DrawSettings()``) with ``min_rows`` filled in when it is None."""
    if draws is None:
        draws = DrawSettings()
    elif not isinstance(draws, DrawSettings):
        raise TypeError(f"`draws` must be a DrawSettings; got {type(draws).__name__}.")
    return draws if draws.min_rows is not None else replace(draws, min_rows=min_rows)


def _input_hash(images_by_identity: Mapping[Any, Sequence[Any]]) -> str:
    from idaudit.faces import content_key

    parts: list[Any] = []
    for label in sorted(images_by_identity, key=str):
        parts.append(str(label))
        parts.extend(np.asarray(im) for im in images_by_identity[label])
    return content_key(*parts)


def _model_attrs(engine: EncodedGenerator) -> dict[str, Any]:
    from idaudit.faces import MODEL_REGISTRY

    encoder = engine.encoder
    attrs: dict[str, Any] = {
        "encoder": str(getattr(encoder, "name", type(encoder).__name__)),
        "encoder_repr": describe(encoder),
    }
    models = [attrs["encoder"]]
    if engine.pipeline is not None:
        detector = engine.pipeline.detector
        attrs["detector"] = str(getattr(detector, "name", type(detector).__name__))
        attrs["detector_repr"] = describe(detector)
        models.append(attrs["detector"])
    for name in models:
        spec = MODEL_REGISTRY.get(_REGISTRY_OF.get(name, name))
        if spec is not None:
            attrs[f"weights.{name}"] = ", ".join(f"{f.filename}:{f.sha256}" for f in spec.files)
    return attrs


def _generator_attrs(generator: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "generator": getattr(generator, "__name__", None) or describe(generator)
    }
    params = getattr(generator, "params", None)
    if callable(params):
        attrs.update({f"generator.{k}": attr_value(v) for k, v in params().items()})
    inner = getattr(generator, "generator", None)
    if inner is not None and hasattr(inner, "latent_dim"):  # LatentFaceSwap on the DCGAN
        from idaudit.faces import MODEL_REGISTRY

        spec = MODEL_REGISTRY["dcgan_faces"]
        attrs["weights.dcgan_faces"] = ", ".join(f"{f.filename}:{f.sha256}" for f in spec.files)
    return attrs


def _run_draws(
    engine: EncodedGenerator, plan: DrawSettings, rng: RngLike, bar: str | None
) -> tuple[npt.NDArray[np.float64], pd.DataFrame, pd.DataFrame]:
    """Draw every identity's sources, run them through ``engine`` and gather the rows.

    Each identity gets its own seed, spawned from ``rng`` in sorted-label order, which picks
    its sources (under ``"with_replacement"``) and seeds each draw of the generator.

    Returns
    -------
    vectors : numpy.ndarray of float64, shape (n_ok, dim)
        Every usable row, identity after identity.
    outcomes : pandas.DataFrame
        One record per draw, ``embedding_row`` indexing ``vectors`` (-1 unless ok).
    rows : pandas.DataFrame
        ``identity``, ``source_index``, ``draw`` of each row of ``vectors``.
    """
    labels = engine.identities.tolist()
    seeds = spawn_seeds(check_random_state(rng), len(labels))
    iterator: Any = zip(labels, seeds, strict=True)
    if bar is not None:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, total=len(labels), desc=bar, unit="identity")
    blocks: list[npt.NDArray[np.float64]] = []
    records: list[dict[str, Any]] = []
    for label, seed in iterator:
        gen = np.random.default_rng(seed)
        n_src = len(engine.images_by_identity[label])
        if plan.sampling == "each":
            picks = np.repeat(np.arange(n_src), plan.repeats)
        else:
            picks = gen.integers(0, n_src, size=plan.n_per_identity)
        draw_seeds = gen.integers(0, 2**63 - 1, size=len(picks), dtype=np.int64)
        emb, recs = engine.encode_draws(label, picks.tolist(), draw_seeds.tolist())
        offset = sum(len(b) for b in blocks)  # this identity's rows follow the earlier ones
        for rec in recs:
            if rec["embedding_row"] >= 0:
                rec["embedding_row"] += offset
        blocks.append(emb)
        records.extend(recs)
    dim = int(engine.encoder.dim)
    vectors = np.concatenate(blocks) if blocks else np.zeros((0, dim))
    outcomes = pd.DataFrame.from_records(records)
    ok = outcomes[outcomes["status"] == "ok"].sort_values("embedding_row")
    rows = ok[["identity", "source_index", "draw"]].reset_index(drop=True)
    return vectors, outcomes, rows


def _warn_exclusions(counts: pd.DataFrame, excluded: tuple[Any, ...], plan: DrawSettings) -> None:
    """Warn about excluded identities and exactly repeated rows (on behalf of the caller).

    Called from :func:`_encode` only: ``stacklevel=4`` points at the caller of the workflow
    (:func:`encode_generator`, :func:`audit_generator`) that called it.
    """
    if excluded:
        named = ", ".join(repr(x) for x in excluded[:_N_NAMED])
        more = f" and {len(excluded) - _N_NAMED} more" if len(excluded) > _N_NAMED else ""
        warnings.warn(
            f"{len(excluded)} identit{'y' if len(excluded) == 1 else 'ies'} left with fewer "
            f"than min_rows={plan.min_rows} usable outputs excluded: {named}{more} "
            "(their counts are in `.counts`).",
            IdauditWarning,
            stacklevel=4,
        )
    n_dup = int(counts["n_duplicate_rows"].sum())
    if n_dup:
        warnings.warn(
            f"{n_dup} usable output row(s) repeat an earlier row of the same identity exactly "
            f"(sampling={plan.sampling!r}, repeats={plan.repeats}): a deterministic generator "
            "over a repeated source gives the same output. Under sampling='with_replacement' "
            "they are iid draws of the channel over the given sources (certify with "
            "duplicates='keep'); they add no information about other images of the "
            "identity. Per-identity counts are in `.counts['n_duplicate_rows']`.",
            IdauditWarning,
            stacklevel=4,
        )


def _encoding_attrs(
    engine: EncodedGenerator,
    generator: Any,
    plan: DrawSettings,
    outcomes: pd.DataFrame,
    counts: pd.DataFrame,
    excluded: tuple[Any, ...],
    rng: RngLike,
) -> dict[str, Any]:
    """Provenance of one :func:`encode_generator` run: inputs, models, settings, counts."""
    from idaudit.faces import FRAME_SIDE

    attrs: dict[str, Any] = {
        "input_sha256": _input_hash(engine.images_by_identity),
        **_model_attrs(engine),
        **_generator_attrs(generator),
        "setting.mode": plan.mode,
        "setting.sampling": plan.sampling,
        "setting.repeats": plan.repeats,
        "setting.n_per_identity": -1 if plan.n_per_identity is None else plan.n_per_identity,
        "setting.min_rows": plan.min_rows,
        "setting.upscale": FRAME_SIDE,
        "setting.failures": plan.failures,
        "n_draws": len(outcomes),
        **{f"n_{s}": int((outcomes["status"] == s).sum()) for s in DRAW_STATUSES},
        "n_duplicate_rows": int(counts["n_duplicate_rows"].sum()),
        "n_excluded_identities": len(excluded),
        "excluded_identities": ", ".join(str(x) for x in excluded),
    }
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        attrs["seed.draws"] = int(rng)
    return attrs


def encode_generator(
    generator: Callable[..., Any],
    images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]],
    *,
    models: FaceModelOptions | FacePipeline | None = None,
    draws: DrawSettings | None = None,
    cache: EmbeddingCache | str | os.PathLike[str] | None = None,
    rng: RngLike = 0,
    progress: bool = True,
    original_faces: MutableMapping[tuple[Any, int], Face | None] | None = None,
) -> GeneratorEmbeddings:
    """Run ``generator`` over every identity's source images and encode the outputs' faces.

    The first half of :func:`audit_generator` (see there for the other parameters): draws,
    runs the callable, detects/aligns/encodes, records and counts failed draws (kept as
    failed outputs or dropped, as ``draws.failures`` says), excludes identities with fewer
    than ``draws.min_rows`` usable rows (default 2 here).

    Parameters
    ----------
    generator, images_by_identity, models, cache, rng, progress
        As in :func:`audit_generator`.
    draws : DrawSettings, optional
        How sources are drawn and failed draws kept (:class:`DrawSettings`); default
        ``DrawSettings()`` with ``min_rows=2``.
    original_faces : mutable mapping of (label, int) to Face or None, optional
        Detections of the original frames for ``mode="paired"``, keyed by ``(identity,
        source index)``: the largest face the detector found on that source image (after
        the enlargement of small frames), or ``None`` when it found none. Entries present
        are used as they are, without running the detector on that original again; missing
        ones are detected and written into the mapping. Pass the same mapping to several
        calls over the same ``images_by_identity`` and ``models`` (as
        :func:`compare_conditions` does) and each original is detected once. Default: a
        fresh mapping for this call. Unused in detect mode.

    Returns
    -------
    GeneratorEmbeddings

    Raises
    ------
    InvalidInputError
        A bad setting, or no identity left with ``min_rows`` usable rows.

    Warns
    -----
    IdauditWarning
        When identities are excluded (the first ten are named), when usable rows repeat
        exactly (a deterministic generator over repeated sources), and when draws of the kept
        identities failed (with the counts by status, and whether they were kept or dropped).
    """
    # the load-aware count: torch's every-core default oversubscribes a busy machine
    with _device.thread_limit(_device.default_threads()):
        plan = _draw_settings(draws, 2)
        pipeline = _face_pipeline(models)
        return _encode(
            generator,
            images_by_identity,
            pipeline,
            plan,
            cache,
            rng,
            original_faces,
            "identities" if progress else None,
        )


def _encode(
    generator: Callable[..., Any],
    images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]],
    pipeline: FacePipeline,
    plan: DrawSettings,
    cache: EmbeddingCache | str | os.PathLike[str] | None,
    rng: RngLike,
    original_faces: MutableMapping[tuple[Any, int], Face | None] | None,
    bar: str | None,
) -> GeneratorEmbeddings:
    """:func:`encode_generator` on checked settings (``plan.min_rows`` set).

    ``bar`` names the progress bar over identities (``None``: no bar).
    """
    assert plan.min_rows is not None
    engine = EncodedGenerator(
        generator,
        None,
        images_by_identity,
        pipeline=pipeline,
        mode=plan.mode,
        cache=cache,
        output_shape=plan.output_shape,
        batch_size=plan.batch_size,
        progress=False,
        original_faces=original_faces,
    )
    vectors, outcomes, rows = _run_draws(engine, plan, rng, bar)
    counts = _counts(engine, outcomes, vectors, rows, plan.min_rows)
    excluded = tuple(counts.index[counts["excluded"]].tolist())
    _warn_exclusions(counts, excluded, plan)
    kept_mask = ~rows["identity"].isin(excluded).to_numpy()
    if not kept_mask.any():
        raise InvalidInputError(
            f"no identity has min_rows={plan.min_rows} usable outputs; what happened to the "
            f"draws: {_status_totals(outcomes)}."
        )
    es = _draws_set(vectors, outcomes, excluded, plan.failures)
    return GeneratorEmbeddings(
        embeddings=es,
        vectors=vectors,
        rows=rows,
        outcomes=outcomes,
        counts=counts,
        excluded=excluded,
        attrs=_encoding_attrs(engine, generator, plan, outcomes, counts, excluded, rng),
        n_encoded=engine.n_encoded,
    )


def _draws_set(
    vectors: npt.NDArray[np.float64],
    outcomes: pd.DataFrame,
    excluded: tuple[Any, ...],
    failures: str,
) -> EmbeddingSet:
    """Build the EmbeddingSet of every draw of the kept identities, a failed one as NaN.

    Each draw's status is its outcome, so a failed draw is a failed output coded by its
    status (``failures="keep"``) or a dropped row counted under it (``"drop"``). The
    EmbeddingSet's own warning is replaced by one that speaks of draws.
    """
    rows = outcomes["embedding_row"].to_numpy()  # (n_draws,) -1 unless ok
    full = np.full((len(outcomes), vectors.shape[1]), np.nan)  # (n_draws, dim)
    full[rows >= 0] = vectors[rows[rows >= 0]]
    kept = ~outcomes["identity"].isin(excluded).to_numpy()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="EmbeddingSet", category=IdauditWarning)
        es = EmbeddingSet(
            full[kept],
            outcomes["identity"].to_numpy()[kept],
            outcomes=outcomes["status"].to_numpy(dtype=str)[kept],
            failures=failures,  # type: ignore[arg-type]
        )
    n_draws = int(kept.sum())
    if es.n_failed_:
        warnings.warn(
            f"{es.n_failed_} of {n_draws} draws of the kept identities failed "
            f"({_fmt_codes(es.failure_reasons_)}); they are kept as failed outputs in "
            "`.embeddings` (failures='keep': certificates count them; the audits compute on "
            f"the {len(es)} successful rows, conditional on success). Per-identity counts "
            "are in `.counts`.",
            IdauditWarning,
            stacklevel=4,
        )
    elif es.n_dropped_:
        warnings.warn(
            f"{es.n_dropped_} failed draws of the kept identities dropped "
            f"({_fmt_codes(es.dropped_)}) (failures='drop': the audits and certificates "
            "describe the generator conditioned on success). Per-identity counts are in "
            "`.counts`.",
            IdauditWarning,
            stacklevel=4,
        )
    return es


def _fmt_codes(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items() if v)


def _status_totals(outcomes: pd.DataFrame) -> str:
    totals = outcomes["status"].value_counts()
    return ", ".join(f"{k}: {int(v)}" for k, v in totals.items())


def _counts(
    engine: EncodedGenerator,
    outcomes: pd.DataFrame,
    vectors: npt.NDArray[np.float64],
    rows: pd.DataFrame,
    min_rows: int,
) -> pd.DataFrame:
    labels = engine.identities.tolist()
    table = pd.crosstab(outcomes["identity"], outcomes["status"]).reindex(
        index=labels, columns=list(DRAW_STATUSES), fill_value=0
    )
    counts = pd.DataFrame(index=pd.Index(labels, name="identity"))
    counts["n_sources"] = [len(engine.images_by_identity[k]) for k in labels]
    counts["n_draws"] = table.sum(axis=1).to_numpy()
    for status in DRAW_STATUSES:
        counts[status] = table[status].to_numpy()
    counts["n_lost"] = table[list(_LOST)].sum(axis=1).to_numpy()
    ident = rows["identity"].to_numpy()
    dups = []
    for label in labels:
        block = vectors[ident == label]
        dups.append(len(block) - (np.unique(block, axis=0).shape[0] if len(block) else 0))
    counts["n_duplicate_rows"] = dups
    cached = outcomes.groupby("identity")["cached"].sum()
    counts["n_cached"] = [int(cached.get(k, 0)) for k in labels]
    counts["excluded"] = counts["ok"] < min_rows
    return counts


def _default_auditors(seed: int) -> list[Any]:
    from idaudit.audits import GaussMechAuditor, KDELRAuditor, MMDTVAuditor, ROCHTAuditor

    return [
        GaussMechAuditor(),
        KDELRAuditor(mix=0.0),
        MMDTVAuditor(),
        ROCHTAuditor(rng=seed),
    ]


def _min_rows_for(auditors: Sequence[Any], certifier: Any) -> int:
    need = 2
    for a in auditors:
        if callable(getattr(a, "min_rows", None)):  # what each auditor says it needs
            need = max(need, int(a.min_rows()))
    if certifier is not None and callable(getattr(certifier, "min_rows", None)):
        need = max(need, int(certifier.min_rows()))
    return need


def _choose_pairs(
    identities: Sequence[Any],
    pairs: int | str | Sequence[tuple[Any, Any]],
    excluded: Sequence[Any],
    seed: int,
    *,
    stacklevel: int = 4,  # the warning points at the caller of audit_generator (via _audit)
) -> tuple[list[tuple[Any, Any]], tuple[tuple[Any, Any], ...]]:
    ids = list(identities)
    if len(ids) < 2:
        raise InvalidInputError(
            f"auditing needs at least 2 identities with enough usable outputs; got {len(ids)}."
        )
    n_all = len(ids) * (len(ids) - 1) // 2
    if isinstance(pairs, str):
        if pairs != "all":
            raise InvalidInputError(f"`pairs` must be an int, 'all' or a list; got {pairs!r}.")
        return sample_pairs(ids, n_all, rng=seed), ()
    if isinstance(pairs, (int, np.integer)) and not isinstance(pairs, bool):
        n = check_integer(int(pairs), "pairs", minimum=1)
        if n > n_all:  # the rule of sample_pairs: all of them, with a warning, in attrs too
            warnings.warn(
                f"`pairs` asks for {n} pairs, but the {len(ids)} identities kept have only "
                f"{n_all}; all {n_all} are audited.",
                IdauditWarning,
                stacklevel=stacklevel,
            )
        return sample_pairs(ids, min(n, n_all), rng=seed), ()
    chosen: list[tuple[Any, Any]] = []
    dropped: list[tuple[Any, Any]] = []
    bad = set(excluded)
    for p in pairs:  # type: ignore[union-attr]
        a, b = p
        (dropped if a in bad or b in bad else chosen).append((a, b))
    if not chosen:
        raise InvalidInputError(
            f"every one of the {len(dropped)} pairs in `pairs` involves an excluded identity."
        )
    return chosen, tuple(dropped)


def audit_generator(
    generator: Callable[..., Any],
    images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]],
    *,
    models: FaceModelOptions | FacePipeline | None = None,
    draws: DrawSettings | None = None,
    audit: AuditSettings | None = None,
    cache: EmbeddingCache | str | os.PathLike[str] | None = None,
    rng: RngLike = 0,
    progress: bool = True,
) -> GeneratorAudit:
    r"""Audit an image → image face pipeline from source images, in one call.

    Runs ``generator`` over every identity's source images, finds, aligns and encodes the
    face in each output, drops and counts what cannot be used, and runs the identity-level
    audits of seed 000 (and, if asked, the reserved-test certificate and the split-half
    controls) on the identities left.

    Parameters
    ----------
    generator : callable
        ``generator(image[, rng=Generator]) -> image`` on ``(H, W, 3)`` uint8 RGB frames, or
        an object with ``batch(images, rngs)`` (:class:`GaussianBlur`, :class:`Pixelate`,
        :class:`PixelNoise`, :class:`LatentFaceSwap`). Each output gets its own generator,
        seeded from ``rng`` by identity and draw: results do not depend on batching.
    images_by_identity : mapping of label to sequence of images
        Source images of each identity, ``(H, W, 3)`` uint8 RGB.
    models : FaceModelOptions or FacePipeline, optional
        Detector and encoder: options for :func:`idaudit.faces.build_face_models` (its first
        encoder is used), or a ready :class:`~idaudit.faces.FacePipeline`. Default:
        ``FaceModelOptions()``, MTCNN and dlib's ResNet. Frames under 160 pixels (the
        shipped DCGAN's 64-pixel faces) are enlarged to 160 pixels and edge-padded before
        detection (:func:`idaudit.faces.prepare_frame`).
    draws : DrawSettings, optional
        Detect or paired mode, sampling, repeats, ``min_rows`` (default: what the auditors
        and the certifier need), what failed draws become, batch size
        (:class:`DrawSettings`).
    audit : AuditSettings, optional
        Pairs, auditors, certifier, controls, device (:class:`AuditSettings`).
    cache : EmbeddingCache or path, optional
        Embeddings by content hash: a second identical run encodes nothing.
    rng : int, SeedSequence or Generator, default 0
        Seeds the draws, the pair shuffle and the default ROC-HT folds.
    progress : bool, default True
        Progress bars.

    Returns
    -------
    GeneratorAudit
        ``results`` (per pair, with ``lost_a``/``lost_b`` and provenance attrs: models and
        their pinned weight digests, versions, settings, the SHA-256 of the source images),
        ``certificates``, ``controls``, ``embeddings`` (rows, per-draw outcomes, per-identity
        counts) and ``dropped_pairs``.

    Raises
    ------
    InvalidInputError
        An empty mapping, an identity without images, a source that is not an RGB uint8
        image, fewer than two identities with enough usable outputs, a bad setting.

    Notes
    -----
    Failures of one draw never stop the run: a callable that raises on an image
    (``generator_error``), an output of the wrong type or size (``bad_output``) and an
    output without a face (``no_face``) are recorded per draw in
    ``embeddings.outcomes``, counted per identity in ``embeddings.counts`` and in the result's
    attrs, and reported per pair as ``lost_a``/``lost_b``. With ``failures="keep"`` they
    are also failed outputs of ``embeddings.embeddings`` (its ``failed_counts`` and
    ``as_outputs()``), which the certifier is fitted on. Identities with fewer than
    ``min_rows`` *successful* draws are still excluded, failed draws and all.

    Examples
    --------
    >>> from idaudit.faces import ShippedFaceGenerator
    >>> from idaudit.pipeline import AuditSettings, DrawSettings, GaussianBlur, audit_generator
    >>> g = ShippedFaceGenerator()
    >>> images = {k: list(g.sample(6, rng=k)) for k in range(3)}  # 3 made-up "people"
    >>> run = audit_generator(GaussianBlur(1.0), images, draws=DrawSettings(mode="paired"),
    ...                       audit=AuditSettings(pairs=3), progress=False)  # doctest: +SKIP
    """
    settings = _audit_settings(audit, compare=False)
    # the load-aware count: torch's every-core default oversubscribes a busy machine
    with _device.thread_limit(_device.default_threads()):
        seed, auditors = _seed_and_auditors(rng, settings)
        plan = _draw_settings(draws, _min_rows_for(auditors, settings.certifier))
        pipeline = _face_pipeline(models)
        coded = _encode(
            generator,
            images_by_identity,
            pipeline,
            plan,
            cache,
            rng,
            None,
            "identities" if progress else None,
        )
        return _audit(coded, settings, auditors, seed, progress)


def _audit(
    coded: GeneratorEmbeddings,
    settings: AuditSettings,
    auditors: Sequence[Any],
    seed: int,
    progress: bool,
) -> GeneratorAudit:
    from sklearn.base import clone

    from idaudit.audits import audit_pairs
    from idaudit.certify import sanity_controls

    es = coded.embeddings
    pairs, certifier = settings.pairs, settings.certifier
    pair_list, dropped = _choose_pairs(es.identities.tolist(), pairs, coded.excluded, seed)
    ds = audit_pairs(es, pair_list, list(auditors), device=settings.device, progress=progress)
    ds = _with_lost(ds, coded.counts, pair_list, " (no face, error, bad output)")
    extra = provenance(title="idaudit.pipeline.audit_generator", seeds={"pairs": seed})
    ds.attrs.update({k: attr_value(v) for k, v in {**extra, **coded.attrs}.items()})
    ds.attrs["n_dropped_pairs"] = len(dropped)
    if isinstance(pairs, (int, np.integer)) and not isinstance(pairs, bool):
        # an int asks for up to that many pairs: record what was asked beside what exists
        ds.attrs["n_pairs_requested"] = int(pairs)
        n_ids = len(es.identities)
        ds.attrs["n_pairs_available"] = n_ids * (n_ids - 1) // 2
    certs = None
    if certifier is not None:
        fitted = clone(certifier).fit(es, pair_list)
        certs = fitted.certificates_
    ctrl = None
    if settings.controls:
        enough = [k for k, n in es.counts.items() if n >= 10]
        if enough:
            ctrl = sanity_controls(es, enough, n_permutations=200, rng=seed, progress=False)
    return GeneratorAudit(ds, certs, ctrl, coded, dropped)


def _with_lost(
    ds: xr.Dataset, counts: pd.DataFrame, pair_list: Sequence[tuple[Any, Any]], why: str = ""
) -> xr.Dataset:
    """Attach ``lost_a``/``lost_b``: the draws of each pair's identities without a usable row.

    ``why`` ends their ``long_name`` (e.g. the statuses a lost draw can have).
    """
    lost = counts["n_lost"]
    return ds.assign(
        {
            f"lost_{side}": variable(
                "pair",
                np.asarray([int(lost[pair[k]]) for pair in pair_list], dtype=np.int64),
                long_name=f"draws of identity_{side} without a usable row{why}",
                status="descriptive",
            )
            for k, side in enumerate("ab")
        }
    )
