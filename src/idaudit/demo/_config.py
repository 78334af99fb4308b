"""The demo's sizes: `DemoConfig` and the seconds-long `QUICK`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from idaudit.demo._faces import FACES_QUICK, FaceDemoConfig
from idaudit.demo._private import PRIVATE_QUICK, PrivateDemoConfig

__all__ = ["QUICK", "DemoConfig"]


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of one demo run.

    Parameters
    ----------
    n_identities : int, default 16
        Point identities of the calibrated-noise part (:func:`demo_identities`).
    dim : int, default 16
        Their embedding dimension.
    n_pairs : int, default 12
        Identity pairs audited at each noise level.
    n_per_identity : int, default 100
        Noisy draws per identity at each noise level.
    noise_sd : tuple of float, default five levels from 0.05 to 8 (geometric)
        Per-coordinate noise standard deviations.
    faces : FaceDemoConfig, default FaceDemoConfig()
        Sizes of the faces part.
    private : PrivateDemoConfig or None, default PrivateDemoConfig()
        Sizes of part three, the private swap audited from pixels; None skips it.
    """

    n_identities: int = 16
    dim: int = 16
    n_pairs: int = 12
    n_per_identity: int = 100
    noise_sd: tuple[float, ...] = field(
        default_factory=lambda: tuple(float(x) for x in np.geomspace(0.05, 8.0, 5))
    )
    faces: FaceDemoConfig = field(default_factory=FaceDemoConfig)
    private: PrivateDemoConfig | None = field(default_factory=PrivateDemoConfig)


#: A configuration of seconds for tests (``idaudit demo --quick``).
QUICK = DemoConfig(
    n_identities=10,
    dim=8,
    n_pairs=6,
    n_per_identity=40,
    noise_sd=(0.1, 1.0, 4.0),
    faces=FACES_QUICK,
    private=PRIVATE_QUICK,
)
