"""The package version: a leaf module, so any module can import it without importing the package.

``pyproject.toml`` declares the same string (``tests/unit/test_packaging.py`` checks that they
agree).
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
