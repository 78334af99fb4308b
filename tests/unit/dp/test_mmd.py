import numpy as np
import pytest

from idaudit.dp import epsilon_from_mmd_hockey_stick, epsilon_from_tv
from idaudit.exceptions import InvalidInputError


def _extremal_pair(eps, delta):
    """Laws of an (ε, δ)-DP mechanism on 4 atoms whose TV attains seed 000, Eq. 4."""
    a = (1 - delta) * np.exp(eps) / (1 + np.exp(eps))
    b = (1 - delta) / (1 + np.exp(eps))
    return np.array([delta, 0.0, a, b]), np.array([0.0, delta, b, a])


@pytest.mark.parametrize(("eps", "delta"), [(0.3, 0.0), (1.0, 0.0), (4.0, 0.0), (1.0, 0.05)])
def test_bound_is_tight_for_the_likelihood_ratio_kernel(eps, delta):
    p, q = _extremal_pair(eps, delta)
    # k(x, y) = 1 if x and y lie on the same side of the likelihood ratio: PSD, values in [0, 1]
    side = (p > q).astype(float)
    kernel = np.equal.outer(side, side).astype(float)  # (4, 4) block of ones
    mmd = float(np.sqrt((p - q) @ kernel @ (p - q)))
    # here MMD = sqrt(2) * TV exactly, so the inverted bound recovers the mechanism's ε
    assert epsilon_from_mmd_hockey_stick(mmd, delta) == pytest.approx(eps, rel=1e-9)


def test_delta_zero_is_twice_artanh_and_tighter_than_tv_route():
    mmd = np.array([0.0, 0.1, 0.5, 1.0, 1.4])
    got = epsilon_from_mmd_hockey_stick(mmd)
    np.testing.assert_allclose(got, 2 * np.arctanh(mmd / np.sqrt(2)), rtol=1e-13)
    # seed 000, Sec. 3.3: tighter than Eq. 14 (MMD/2 through the TV route) for k >= 0
    assert np.all(got[1:] > epsilon_from_tv(mmd[1:] / 2))


def test_domain_edges():
    assert epsilon_from_mmd_hockey_stick(np.sqrt(2)) == np.inf
    assert epsilon_from_mmd_hockey_stick(1.6) == np.inf  # beyond what a [0, 1] kernel allows
    assert epsilon_from_mmd_hockey_stick(0.0, 0.1) == 0.0
    assert epsilon_from_mmd_hockey_stick(0.1, 0.5) == 0.0  # MMD/sqrt(2) <= δ: vacuous
    assert isinstance(epsilon_from_mmd_hockey_stick(0.2), float)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((-0.1,), r"`mmd` must be in \[0, inf\]; got -0.1\."),
        ((np.nan,), r"`mmd` must be in \[0, inf\]; got nan\."),
        ((0.1, 1.5), r"`delta` must be in \[0, 1\]; got 1.5\."),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(InvalidInputError, match=match):
        epsilon_from_mmd_hockey_stick(*args)
