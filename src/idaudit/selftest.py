"""Check the installed idaudit: ``idaudit.test()`` or ``python -m idaudit.selftest``.

Recomputes the published numbers idaudit reproduces (seed 000's zero-error certificates and
error bound, the analytic Gaussian mechanism against an independent implementation) and runs
statistical soundness checks on mechanisms whose ε is proved, as numpy's and scipy's
``test()`` do, but without pytest or the repository: a few minutes on a laptop. The report
starts with the versions and the machine, so that it can be pasted into a bug report.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main", "test"]


def test(*, published_only: bool = False) -> bool:  # noqa: PT028
    """Run the published-number and soundness checks shipped with idaudit.

    Parameters
    ----------
    published_only : bool, default False
        Only the published numbers (seconds), not the soundness checks (about a minute).

    Returns
    -------
    bool
        Whether every check passed; each check's outcome, the versions and the machine are
        printed.

    Examples
    --------
    >>> import idaudit
    >>> idaudit.test(published_only=True)  # doctest: +SKIP
    idaudit 0.1.0 from ...
    ...
    2 of 2 checks passed in 0.1 s
    True
    """
    if not isinstance(published_only, bool):
        raise TypeError(f"`published_only` must be a bool; got {type(published_only).__name__}.")
    from idaudit.testing import run_self_checks

    kinds = ("published",) if published_only else ("published", "soundness")
    return run_self_checks(kinds=kinds)


test.__test__ = False  # type: ignore[attr-defined]  # not a test for pytest to collect


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: ``python -m idaudit.selftest [--published-only]``; 0 when green."""
    parser = argparse.ArgumentParser(
        prog="python -m idaudit.selftest", description="Check the installed idaudit."
    )
    parser.add_argument(
        "--published-only", action="store_true", help="only the published numbers (seconds)"
    )
    args = parser.parse_args(argv)
    return 0 if test(published_only=args.published_only) else 1


if __name__ == "__main__":
    sys.exit(main())
