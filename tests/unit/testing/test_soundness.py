"""idaudit.testing's soundness checks: counts by brute force, p-values from scipy, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from idaudit.dp import clopper_pearson_upper
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.testing import (
    Claim,
    assert_sound,
    check_claims,
    check_rate,
    check_soundness,
    smallest_testable_alpha,
)
from idaudit.testing._soundness import _run_seeds

P = 0.3  # a Bernoulli rate bounded from above by Clopper-Pearson from 50 draws


def _draw(seed: int) -> int:
    return int(np.random.default_rng(seed).binomial(50, P))


def _cp(level: float):
    return lambda k, _: Claim(clopper_pearson_upper(k, 50, level), "certified_upper_bound")


def test_count_pvalue_and_seeds_match_a_plain_loop() -> None:
    res = check_soundness(_cp(0.1), _draw, P, n_reps=300, alpha=0.1, rng=range(500, 800))
    # the same runs written out by hand
    missed = [s for s in range(500, 800) if clopper_pearson_upper(_draw(s), 50, 0.1) < P]
    assert res.n_violations == len(missed)
    assert res.failing_seeds == tuple(missed)
    assert res.pvalue == stats.binomtest(len(missed), 300, 0.1, alternative="greater").pvalue
    bounds = [clopper_pearson_upper(_draw(s), 50, 0.1) for s in range(500, 800)]
    assert res.tightness == pytest.approx(np.mean(bounds) / P, rel=1e-12)
    assert res.sound
    assert res.status == "certified_upper_bound"
    # a failing seed reproduces its violation alone
    assert clopper_pearson_upper(_draw(res.failing_seeds[0]), 50, 0.1) < P


def test_a_bound_without_its_confidence_correction_is_caught() -> None:
    # the same upper bound at level 0.5 claimed as a 0.1-level certificate: it misses about
    # half the time (a median, not a bound), far above 0.1
    res = check_soundness(_cp(0.5), _draw, P, n_reps=300, alpha=0.1)
    assert not res.sound
    assert res.rate > 0.25
    with pytest.raises(AssertionError, match=r"unsound: claim: \d+ of 300 runs violated") as err:
        assert_sound(res)
    message = str(err.value)
    assert f"p-value {res.pvalue:.3g}" in message
    assert "nominal level alpha = 0.1" in message
    assert "mean 30, sd 5.2" in message  # the tolerance's arithmetic
    assert "failing seeds: " in message
    assert "tightness" in message


def test_a_family_is_one_event_per_run() -> None:
    # two bounds per run, each missing with its own chance: the run misses if either does
    def both(k: tuple[int, int], _: int) -> Claim:
        return Claim(
            [clopper_pearson_upper(k[0], 50, 0.05), clopper_pearson_upper(k[1], 50, 0.05)],
            "certified_upper_bound",
        )

    res = check_soundness(
        both, lambda s: (_draw(s), _draw(s + 10_000)), P, n_reps=200, alpha=0.1, rng=range(200)
    )
    one = [clopper_pearson_upper(_draw(s), 50, 0.05) < P for s in range(200)]
    two = [clopper_pearson_upper(_draw(s + 10_000), 50, 0.05) < P for s in range(200)]
    assert res.n_violations == sum(a or b for a, b in zip(one, two, strict=True))


def test_named_claims_and_per_run_truths() -> None:
    def claims(k: int, _: int) -> dict[str, Claim]:
        return {
            "upper": Claim(clopper_pearson_upper(k, 50, 0.1), "certified_upper_bound", truth=P),
            "lower": Claim(1 - clopper_pearson_upper(50 - k, 50, 0.1), "certified_lower_bound"),
        }

    res = check_soundness(claims, _draw, {"lower": P}, n_reps=200, alpha=0.1)
    assert set(res) == {"upper", "lower"}
    assert res["lower"].status == "certified_lower_bound"
    assert_sound(res)


def test_check_claims_reads_a_dataarray_status() -> None:
    lb = np.random.default_rng(0).uniform(0.0, 1.05, size=200)  # P(lb > 1) = 0.05 / 1.05
    da = xr.DataArray(lb, dims="pair", name="epsilon_lb", attrs={"status": "certified_lower_bound"})
    res = check_claims(da, 1.0, alpha=0.05)
    assert res.n_violations == int((lb > 1.0).sum())
    assert res.name == "epsilon_lb"
    assert res.tightness == pytest.approx(lb.mean())


def test_check_rate_matches_scipy_both_ways() -> None:
    for k in (0, 11, 25):
        for alt in ("greater", "two-sided"):
            res = check_rate(k, 300, 0.05, alternative=alt)
            assert res.pvalue == stats.binomtest(k, 300, 0.05, alternative=alt).pvalue
    with pytest.raises(AssertionError, match="miscalibrated"):
        assert_sound(check_rate(1, 300, 0.05, alternative="two-sided"))


def test_smallest_testable_alpha() -> None:
    assert smallest_testable_alpha(200) == 0.005
    with pytest.raises(InvalidInputError, match=r"`n_reps` = 10 is too small to test `alpha` = "):
        check_soundness(_cp(0.01), _draw, P, n_reps=10, alpha=0.01)
    with pytest.raises(InvalidInputError, match=r"smallest level 50 runs resolve is 0.02"):
        check_rate(0, 50, 0.01)


@pytest.mark.parametrize(
    ("make_claim", "truth", "error", "match"),
    [
        (lambda k, s: 0.5, P, InvalidInputError, "number without a status"),
        (lambda k, s: Claim(np.nan, "certified_upper_bound"), P, InvalidInputError, "NaN"),
        (
            lambda k, s: Claim([0.5, 0.6, 0.7], "certified_upper_bound"),
            [P, P],
            InvalidInputError,
            r"shape \(3,\), which does not match the truth's \(2,\)",
        ),
        (
            lambda k, s: Claim(0.5, "sample_estimate"),
            P,
            InvalidInputError,
            "status 'sample_estimate', which states no probability",
        ),
        (
            lambda k, s: Claim(0.5, "certified_lower_bound"),
            np.inf,
            InvalidInputError,
            "could not fail",
        ),
        (lambda k, s: Claim(0.5, "certified_lower_bound"), np.nan, InvalidInputError, "NaN"),
        (lambda k, s: Claim(0.5, "certified_lower_bound"), None, InvalidInputError, "missing"),
        (
            lambda k, s: Claim(0.5, "certified_lower_bound", truth=1.0),
            1.0,
            InvalidInputError,
            "carries its own truth",
        ),
        (
            lambda k, s: xr.DataArray([0.5], dims="pair"),
            P,
            InvalidInputError,
            "without a 'status' attribute",
        ),
        (lambda k, s: xr.Dataset(), P, InvalidInputError, "pass one variable"),
        (lambda k, s: "0.5", P, TypeError, "must be a Claim"),
        (
            lambda k, s: Claim([], "certified_upper_bound"),
            P,
            InvalidInputError,
            r"holds no values \(shape \(0,\)\): an empty family claims nothing",
        ),
        (
            lambda k, s: Claim(0.5, "certified_upper_bound"),
            [P, P],
            InvalidInputError,
            r"shape \(\), which does not match the truth's \(2,\): .* without growing it",
        ),
        (
            lambda k, s: Claim(0.5, "certified_upper_bound"),
            "0.3",
            TypeError,
            "`truth` must be a number or an array of numbers; got '0.3'",
        ),
    ],
)
def test_bad_claims_are_named(make_claim, truth, error, match) -> None:
    with pytest.raises(error, match=match):
        check_soundness(make_claim, _draw, truth, n_reps=20, alpha=0.1)


def test_claims_that_change_between_runs_are_refused() -> None:
    def flip(k: int, seed: int) -> Claim:
        return Claim(0.5, "certified_upper_bound" if seed == 0 else "certified_lower_bound")

    with pytest.raises(InvalidInputError, match=r"run 1 \(seed 1\) has status"):
        check_soundness(flip, _draw, P, n_reps=20, alpha=0.1, rng=range(20))

    def names(k: int, seed: int) -> dict[str, Claim]:
        return {"a" if seed == 0 else "b": Claim(0.5, "certified_upper_bound")}

    with pytest.raises(InvalidInputError, match=r"returned claims \['b'\] in run 1"):
        check_soundness(names, _draw, P, n_reps=20, alpha=0.1, rng=range(20))


def test_bad_levels_and_seeds() -> None:
    with pytest.raises(InvalidInputError, match=r"`alpha` must be in \(0, 1\); got 1.5"):
        check_soundness(_cp(0.1), _draw, P, n_reps=20, alpha=1.5)
    with pytest.raises(InvalidInputError, match="one seed per run: 3 vs n_reps = 20"):
        check_soundness(_cp(0.1), _draw, P, n_reps=20, alpha=0.1, rng=[1, 2, 3])
    with pytest.raises(TypeError, match="`make_claim` must be callable"):
        check_soundness(0.5, _draw, P, n_reps=20, alpha=0.1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"`n_events` must be <= n_reps = 10; got 11"):
        check_rate(11, 10, 0.5)
    with pytest.raises(TypeError, match="SoundnessResult"):
        assert_sound(0.5)  # type: ignore[arg-type]


def test_seed_forms() -> None:
    # 100 runs at alpha = 0.1: enough power that the check does not warn (see below)
    a = check_soundness(_cp(0.1), _draw, P, n_reps=100, alpha=0.1, rng=list(range(7, 107)))
    b = check_soundness(_cp(0.1), _draw, P, n_reps=100, alpha=0.1, rng=range(7, 107))
    assert a == b
    c = check_soundness(_cp(0.1), _draw, P, n_reps=100, alpha=0.1, rng=np.random.default_rng(3))
    d = check_soundness(_cp(0.1), _draw, P, n_reps=100, alpha=0.1, rng=np.random.default_rng(3))
    assert c == d


def test_check_claims_refuses_a_truth_that_grows_the_claims() -> None:
    lb = Claim(np.linspace(0.0, 0.9, 100), "certified_lower_bound")
    # a column of truths against a row of claims would compare every claim with every truth
    with pytest.raises(InvalidInputError, match=r"shape \(100,\), .* truth's \(100, 1\)"):
        check_claims(lb, np.ones((100, 1)), alpha=0.1)
    with pytest.raises(InvalidInputError, match="an empty family claims nothing"):
        check_claims(Claim(np.empty((100, 0)), "certified_lower_bound"), 1.0, alpha=0.1)
    with pytest.raises(TypeError, match="`truth` must be a number"):
        check_claims(lb, "1.0", alpha=0.1)
    assert check_claims(lb, np.ones(100), alpha=0.1).n_violations == 0


def test_int_seeds_give_independent_replications() -> None:
    a = check_soundness(_cp(0.1), _draw, P, n_reps=300, alpha=0.1, rng=0)
    b = check_soundness(_cp(0.1), _draw, P, n_reps=300, alpha=0.1, rng=1)
    runs_a = set(_run_seeds(0, 300))
    # rng + i would share 299 of the 300 runs; spawned seeds share none
    assert not runs_a & set(_run_seeds(1, 300))
    assert _run_seeds(0, 300) == _run_seeds(np.random.SeedSequence(0), 300)
    expected = [
        int(c.generate_state(2, np.uint64)[0] >> np.uint64(1))
        for c in np.random.SeedSequence(0).spawn(3)
    ]
    assert _run_seeds(0, 3) == expected
    assert a.n_reps == b.n_reps == 300
    with pytest.raises(InvalidInputError, match=r"distinct seeds .*; repeated: \[3\]"):
        check_soundness(_cp(0.1), _draw, P, n_reps=20, alpha=0.1, rng=[3] * 2 + list(range(4, 22)))


def test_power_is_reported_and_a_powerless_check_warns() -> None:
    res = check_rate(12, 300, 0.05)
    # the count binomtest rejects at, by brute force, and the chance of reaching it
    crit = min(
        k for k in range(301) if stats.binomtest(k, 300, 0.05, alternative="greater").pvalue <= 0.01
    )
    assert res.power(0.1) == pytest.approx(stats.binom.sf(crit - 1, 300, 0.1), rel=1e-12)
    assert res.power(0.05) <= 0.01  # at the nominal level: at most the significance
    assert stats.binom.sf(crit - 1, 300, res.detectable_rate) == pytest.approx(0.8, abs=1e-9)
    assert "power: 0.86 against twice the level" in res.message()
    # 20 runs at alpha = 0.05: a claim violated at 0.1 fails the check 4 % of the time
    with pytest.warns(IdauditWarning, match=r"probability 0\.04 only .* raise n_reps"):
        check_rate(0, 20, 0.05)
    with pytest.warns(IdauditWarning, match="twice its level"):
        check_soundness(_cp(0.1), _draw, P, n_reps=20, alpha=0.1, rng=range(20))


def test_the_smallest_level_is_testable_despite_rounding() -> None:
    # 49 * (1 / 49) < 1 in floating point: the level 1 / n_reps is one expected violation
    assert 49 * (1 / 49) < 1
    with pytest.warns(IdauditWarning):  # testable, but with little power
        res = check_rate(1, 49, 1 / 49)
    assert res.pvalue == stats.binomtest(1, 49, 1 / 49, alternative="greater").pvalue
    with pytest.raises(InvalidInputError, match=r"smallest level 49 runs resolve is 0\.0204082"):
        check_rate(0, 49, 1 / 50)
