"""Error and warning classes raised by idaudit.

Every error names the argument, the rule it broke and the offending value, e.g.
``"`alpha` must be in (0, 1); got 1.5."``.
"""

from __future__ import annotations

__all__ = [
    "IdauditError",
    "IdauditWarning",
    "InvalidInputError",
    "MissingWeightsError",
    "NotFittedError",
    "UnsupportedStatementError",
]


class IdauditError(Exception):
    """Base class of every error idaudit raises on purpose."""


class InvalidInputError(IdauditError, ValueError):
    """An argument has a valid type but a value idaudit cannot work with.

    Subclasses :class:`ValueError`, so ``except ValueError`` keeps working.
    """


class NotFittedError(IdauditError, ValueError, AttributeError):
    """A fitted attribute (trailing underscore) was read before ``fit``.

    Subclasses both :class:`ValueError` and :class:`AttributeError`, as scikit-learn's
    ``NotFittedError`` does, so ``hasattr(est, "epsilon_")`` is ``False`` before fitting.
    """


class MissingWeightsError(IdauditError, FileNotFoundError):
    """A model's weight file is not on local disk.

    idaudit never downloads weights: the message names the file, where it is published and
    where to put it (an explicit path argument, or ``$IDAUDIT_WEIGHTS/<model>/<file>``).
    """


class UnsupportedStatementError(InvalidInputError):
    """A number was asked to support a sentence its formal status cannot say.

    For instance, asserting that a mechanism is ε-DP from a certified *lower* bound
    (:func:`idaudit.testing.assert_private`): refused, never passed.
    """


class IdauditWarning(UserWarning):
    """Warnings issued by idaudit (rows dropped, unreliable settings, ...)."""
