"""Test a mechanism, an auditor or a certificate the way idaudit tests its own.

Soundness over seeded runs (one event per run, an exact one-sided binomial test against the
nominal level), assertions that read a result's formal status and refuse a sentence it cannot
support, mechanisms whose ε(δ) is proved, and the published numbers idaudit reproduces.
Importing this module does not import pytest; the pytest plugin is
:mod:`idaudit.testing.plugin` (registered through the ``pytest11`` entry point).

==================================  =========================================================
:func:`check_soundness`             run a claim ``n_reps`` times on a known mechanism →
                                    :class:`SoundnessResult` (count, level, exact p-value,
                                    tightness, failing seeds)
:func:`check_claims`                the same on claims already computed for every run
:func:`check_rate`                  a bare count of events against a nominal rate
:func:`assert_sound`                raise with the whole account when a check failed
:class:`Claim`                      a value (or family of values) with its status
:func:`assert_epsilon_below`        "the reported <status> is at most ``bound``"
:func:`assert_epsilon_above`        "the mechanism's ε exceeds ``bound``" (certified only)
:func:`assert_private`              "the mechanism is ε-DP" (upper bounds and references only)
:func:`known_pair`                  two point identities under Laplace or Gaussian noise
:func:`gaussian_scores` ...         score laws with exact error rates and ε(δ)
:func:`synthetic_condition`         VGG-like and CelebA-like conditions with exact ε(δ)
:mod:`~idaudit.testing.published`   seed 000's recomputable numbers, with sources
==================================  =========================================================

See docs/testing.md ("Testing your mechanism or auditor with pytest").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# imported on first use (PEP 562), so that the pytest plugin, a submodule of this package,
# loads none of the science packages in projects that never use it
_LAZY: dict[str, str] = {
    "GaussianNoise": "idaudit.mechanisms",
    "LaplaceNoise": "idaudit.mechanisms",
    "sample_embeddings": "idaudit.mechanisms",
    "Claim": "idaudit.testing._claims",
    "KnownPair": "idaudit.testing._known",
    "ScoreMechanism": "idaudit.testing._known",
    "atom_scores": "idaudit.testing._known",
    "gaussian_scores": "idaudit.testing._known",
    "known_pair": "idaudit.testing._known",
    "laplace_scores": "idaudit.testing._known",
    "randomized_response": "idaudit.testing._known",
    "synthetic_condition": "idaudit.testing._known",
    "SoundnessResult": "idaudit.testing._soundness",
    "assert_sound": "idaudit.testing._soundness",
    "check_claims": "idaudit.testing._soundness",
    "check_rate": "idaudit.testing._soundness",
    "check_soundness": "idaudit.testing._soundness",
    "smallest_testable_alpha": "idaudit.testing._soundness",
    "assert_epsilon_above": "idaudit.testing._statements",
    "assert_epsilon_below": "idaudit.testing._statements",
    "assert_private": "idaudit.testing._statements",
}

if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from idaudit.mechanisms import GaussianNoise, LaplaceNoise, sample_embeddings
    from idaudit.testing import published
    from idaudit.testing._claims import Claim
    from idaudit.testing._known import (
        KnownPair,
        ScoreMechanism,
        atom_scores,
        gaussian_scores,
        known_pair,
        laplace_scores,
        randomized_response,
        synthetic_condition,
    )
    from idaudit.testing._soundness import (
        SoundnessResult,
        assert_sound,
        check_claims,
        check_rate,
        check_soundness,
        smallest_testable_alpha,
    )
    from idaudit.testing._statements import (
        assert_epsilon_above,
        assert_epsilon_below,
        assert_private,
    )


def __getattr__(name: str) -> Any:
    if name == "published":
        return importlib.import_module("idaudit.testing.published")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'idaudit.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Claim",
    "GaussianNoise",
    "KnownPair",
    "LaplaceNoise",
    "ScoreMechanism",
    "SoundnessResult",
    "assert_epsilon_above",
    "assert_epsilon_below",
    "assert_private",
    "assert_sound",
    "atom_scores",
    "check_claims",
    "check_rate",
    "check_soundness",
    "gaussian_scores",
    "known_pair",
    "laplace_scores",
    "published",
    "randomized_response",
    "run_self_checks",
    "sample_embeddings",
    "smallest_testable_alpha",
    "synthetic_condition",
]


def run_self_checks(*, kinds: tuple[str, ...] = ("published", "soundness")) -> bool:
    """Run the published-number and soundness checks shipped with idaudit.

    :func:`idaudit.test` is the same with a simpler switch.

    Parameters
    ----------
    kinds : tuple of str, default ("published", "soundness")
        Which kinds of check to run.

    Returns
    -------
    bool
        Whether every check passed.
    """
    from idaudit.testing._checks import run_self_checks as run

    return run(kinds=kinds)
