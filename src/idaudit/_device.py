"""Device resolution shared by every module that runs torch code."""

from __future__ import annotations

from typing import Any

import torch

from idaudit.exceptions import InvalidInputError

__all__ = ["resolve_device"]


def resolve_device(device: Any) -> torch.device:
    """Turn ``device`` into a :class:`torch.device`, refusing CUDA where there is none.

    Parameters
    ----------
    device : str or torch.device
        ``"cpu"``, ``"cuda"`` or ``"cuda:<index>"``.

    Returns
    -------
    torch.device

    Raises
    ------
    TypeError
        If ``device`` is not a string or ``torch.device``.
    InvalidInputError
        If it names another device type, or CUDA is requested but unavailable (there is no
        silent fallback to the CPU).
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"`device` must be a string such as 'cpu' or 'cuda'; got {device!r}.")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise InvalidInputError(f"`device` must be 'cpu' or 'cuda'; got {device!r}.") from exc
    if dev.type not in ("cpu", "cuda"):
        raise InvalidInputError(f"`device` must be 'cpu' or 'cuda'; got {device!r}.")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(
            f"`device`={device!r} was requested but CUDA is not available here "
            "(torch.cuda.is_available() is False); use device='cpu'."
        )
    return dev
