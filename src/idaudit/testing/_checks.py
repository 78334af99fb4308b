"""The checks :func:`idaudit.test` runs on the installed copy: published numbers and soundness.

Each check is a plain function that raises ``AssertionError`` when the installed idaudit
disagrees with an independent reference: a number seed 000 prints, a closed form, an
independent implementation's value recorded in :mod:`idaudit.testing.published`, or a
mechanism whose ε is proved. None needs pytest, a network or the repository.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import TextIO

import numpy as np

from idaudit._version import __version__
from idaudit.data import EmbeddingSet
from idaudit.testing import published
from idaudit.testing._claims import Claim
from idaudit.testing._known import gaussian_scores, known_pair
from idaudit.testing._soundness import (
    assert_sound,
    check_claims,
    check_rate,
    check_soundness,
)

__all__ = ["SELF_CHECKS", "SelfCheck", "run_self_checks"]


@dataclass(frozen=True)
class SelfCheck:
    """One check of the installed copy.

    Attributes
    ----------
    name : str
        What it checks.
    kind : {"published", "soundness"}
        A published (or closed-form) number, or a statistical soundness check.
    run : callable
        Raises ``AssertionError`` on a disagreement.
    """

    name: str
    kind: str
    run: Callable[[], None]


def _close(got: float, want: published.PublishedValue) -> None:
    assert abs(got - want.value) <= want.atol, (
        f"{want.name}: got {got:.6g}, published {want.value:g} +- {want.atol:g} ({want.source})"
    )


def _zero_error_certificates() -> None:
    from idaudit.dp import clopper_pearson_upper, epsilon_from_error_rates

    for v in published.ZERO_ERROR_CERTIFICATES:
        u = clopper_pearson_upper(0, v.inputs["n"], v.inputs["alpha"])
        _close(float(epsilon_from_error_rates(u, u)), v)
    v = published.CELEBA_UPPER_ERROR_BOUND
    _close(float(clopper_pearson_upper(v.inputs["k"], v.inputs["n"], v.inputs["alpha"])), v)


def _analytic_gaussian() -> None:
    from scipy import stats

    from idaudit.dp import gaussian_epsilon

    for v in published.ANALYTIC_GAUSSIAN:
        s, d, delta = v.inputs["sigma"], v.inputs["sensitivity"], v.inputs["delta"]
        eps = float(gaussian_epsilon(delta, s, d))
        _close(eps, v)
        # and the closed form it inverts (Balle & Wang 2018, Theorem 8), at the value found:
        # delta(eps) = Phi(D / 2s - eps s / D) - e^eps Phi(-D / 2s - eps s / D)
        a, b = d / (2 * s), eps * s / d
        back = stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)
        assert abs(back - delta) <= 1e-3 * delta, f"{v.name}: delta(eps) = {back:.6g}"


def _clopper_pearson_covers() -> None:
    from idaudit.dp import clopper_pearson_upper

    # one-sided 90 % bound on a Bernoulli(0.3) rate from 50 draws: violated <= 10 % of runs;
    # 1000 runs: sd sqrt(1000 * 0.1 * 0.9) = 9.5 around at most 100
    p = 0.3
    assert_sound(
        check_soundness(
            lambda k, _: Claim(
                clopper_pearson_upper(k, 50, 0.1), "certified_upper_bound", quantity="rate"
            ),
            lambda seed: int(np.random.default_rng(seed).binomial(50, p)),
            p,
            n_reps=1000,
            alpha=0.1,
            rng=range(1000),
            significance=0.001,
        )
    )


def _scores_band_is_sound_and_a_broken_one_is_caught() -> None:
    from idaudit.certify import certify_scores
    from idaudit.dp import clopper_pearson_upper

    mech = gaussian_scores(1.0)  # exactly 1-GDP: every threshold's error rates are closed form

    def band(data: tuple[np.ndarray, np.ndarray], seed: int) -> Claim:
        cert = certify_scores(*data, alpha=0.2, thresholds="band")
        t = cert.thresholds
        upper = np.concatenate([cert.fpr_upper, cert.fnr_upper])
        return Claim(
            upper,
            "certified_upper_bound",
            truth=np.concatenate([mech.fpr(t), mech.fnr(t)]),
            quantity="error_rate",
        )

    def draw(seed: int) -> tuple[np.ndarray, np.ndarray]:
        return mech.sample(np.random.default_rng(seed), 100)

    # 300 runs at alpha = 0.2: sd sqrt(300 * 0.2 * 0.8) = 6.9 around at most 60
    assert_sound(
        check_soundness(band, draw, n_reps=300, alpha=0.2, rng=range(300), significance=0.001)
    )

    def no_union_bound(data: tuple[np.ndarray, np.ndarray], seed: int) -> Claim:
        # the two rates of a fixed test, each bounded at the full alpha: the factor 2 of the
        # union bound dropped, so the pair of bounds fails jointly near 1 - 0.8^2 = 0.36
        a, b = data
        t = mech.threshold
        fp, fn = int((a >= t).sum()), int((b < t).sum())
        upper = np.array([clopper_pearson_upper(fp, 100, 0.2), clopper_pearson_upper(fn, 100, 0.2)])
        return Claim(
            upper,
            "certified_upper_bound",
            truth=[mech.fpr(t), mech.fnr(t)],
            quantity="error_rate",
        )

    broken = check_soundness(no_union_bound, draw, n_reps=300, alpha=0.2, rng=range(300))
    assert not broken.sound, f"a certificate without its union bound passed:\n{broken.message()}"


def _reserved_test_certificate_is_sound() -> None:
    from idaudit.certify import ReservedTestCertifier

    # Laplace pair at distance 1, scale 1: pure epsilon exactly 1
    pair = known_pair("laplace")
    truth = pair.epsilon()

    def certify(es: EmbeddingSet, seed: int) -> ReservedTestCertifier:
        cert: ReservedTestCertifier = ReservedTestCertifier(
            n_select=1, n_candidates=1, n_folds=2, alpha=0.2, rng=10_000 + seed, progress=False
        ).fit(es, [pair.pair])
        return cert

    # 100 runs at alpha = 0.2: sd 4 around at most 20; fails from about 31
    res = check_soundness(
        certify, lambda s: pair.draw(200, rng=s), truth, n_reps=100, alpha=0.2, rng=range(100)
    )
    assert_sound(res)
    assert res.tightness > 0.1, f"the certificates have no power: {res.message()}"


def _mmdtv_certified_bound_is_sound() -> None:
    from idaudit.audits import MMDTVAuditor, audit_pairs
    from idaudit.data import EmbeddingSet
    from idaudit.mechanisms import LaplaceNoise, sample_embeddings

    # 100 independent copies of a Laplace pair (scale 0.5, distance 1: pure epsilon 2) as
    # 100 disjoint pairs of one set, audited in one batched call; each pair is one run
    reps = 100
    base = EmbeddingSet(np.tile([[0.0], [1.0]], (reps, 1)), np.arange(2 * reps), normalize=False)
    mech = LaplaceNoise(base, 0.5)
    es = sample_embeddings(mech, 60, rng=2)
    pairs = [(2 * r, 2 * r + 1) for r in range(reps)]
    ds = audit_pairs(es, pairs, [MMDTVAuditor(confidence_level=0.8, rng=0)], progress=False)
    assert_sound(check_claims(ds["mmdtv_epsilon_lb"], mech.pair_epsilon(0, 1), alpha=0.2))


def _permutation_test_is_calibrated() -> None:
    from idaudit.audits import MMDTVAuditor

    # under H0 the p-value is uniform on the grid k/50: P(p <= 0.1) = 0.1 exactly
    reps = 200
    rejected = 0
    for rep in range(reps):
        gen = np.random.default_rng(50_000 + rep)
        a, b = gen.normal(size=(6, 2)), gen.normal(size=(6, 2))
        rejected += MMDTVAuditor(n_permutations=49, rng=rep).fit(a, b).pvalue_ <= 0.1
    # sd sqrt(200 * 0.1 * 0.9) = 4.2 around 20
    assert_sound(check_rate(int(rejected), reps, 0.1, alternative="two-sided", significance=1e-3))


#: Every check :func:`idaudit.test` runs, in order.
SELF_CHECKS: tuple[SelfCheck, ...] = (
    SelfCheck(
        "zero-error certificates 0 / 0.454 / 1.277 and the 0.522 bound",
        "published",
        _zero_error_certificates,
    ),
    SelfCheck(
        "analytic Gaussian epsilon(delta) vs dp-accounting", "published", _analytic_gaussian
    ),
    SelfCheck("Clopper-Pearson upper bounds cover", "soundness", _clopper_pearson_covers),
    SelfCheck(
        "trade-off band sound; no-union-bound certificate caught",
        "soundness",
        _scores_band_is_sound_and_a_broken_one_is_caught,
    ),
    SelfCheck(
        "reserved-test certificate sound on a Laplace pair",
        "soundness",
        _reserved_test_certificate_is_sound,
    ),
    SelfCheck(
        "certified MMD-TV sound on a Laplace pair", "soundness", _mmdtv_certified_bound_is_sound
    ),
    SelfCheck(
        "MMD permutation test calibrated under H0", "soundness", _permutation_test_is_calibrated
    ),
)


def _versions() -> str:
    names = ("numpy", "scipy", "scikit-learn", "xarray", "torch")
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def run_self_checks(
    *, kinds: tuple[str, ...] = ("published", "soundness"), stream: TextIO | None = None
) -> bool:
    """Run :data:`SELF_CHECKS` on the installed idaudit and report each on ``stream``.

    Parameters
    ----------
    kinds : tuple of str, default ("published", "soundness")
        Which kinds of check to run.
    stream : text stream, optional
        Where the report goes (default ``sys.stdout``).

    Returns
    -------
    bool
        Whether every check passed.
    """
    unknown = sorted(set(kinds) - {"published", "soundness"})
    if unknown:
        raise ValueError(f"`kinds` must hold 'published' and/or 'soundness'; got {unknown[0]!r}.")
    out = stream or sys.stdout
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../idaudit
    print(f"idaudit {__version__} from {package}", file=out)
    print(f"Python {platform.python_version()} ({sys.executable})", file=out)
    print(_versions(), file=out)
    print(
        f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs",
        file=out,
    )
    failed = 0
    start = time.perf_counter()
    for check in (c for c in SELF_CHECKS if c.kind in kinds):
        t0 = time.perf_counter()
        try:
            check.run()
        except AssertionError:
            failed += 1
            print(f"FAIL  [{check.kind}] {check.name}", file=out)
            print(traceback.format_exc(), file=out)
        else:
            print(f"ok    [{check.kind}] {check.name} ({time.perf_counter() - t0:.1f} s)", file=out)
    total = sum(c.kind in kinds for c in SELF_CHECKS)
    took = f"in {time.perf_counter() - start:.1f} s"
    if failed:
        print(f"{failed} of {total} checks FAILED {took}", file=out)
    else:
        print(f"{total} of {total} checks passed {took}", file=out)
    return failed == 0
