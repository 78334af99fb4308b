"""Device resolution and thread handling shared by every module that runs torch code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from idaudit.exceptions import InvalidInputError

__all__ = ["resolve_device", "single_threaded"]


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


_THREADS_LOCK = threading.Lock()
_THREADS_STATE: dict[str, Any] = {"users": 0, "torch": 1, "limits": None}


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run torch and the BLAS libraries on one thread each while any chunk runs.

    The kernels gain nothing from intra-op threads at audit sizes, and their spinning
    OpenMP threads slow a call down tenfold when another process holds a core; chunks run
    side by side on threads instead. Thread counts are process-wide, so the first chunk to
    start lowers them and the last to finish restores them (threads take turns through a
    lock, so none restores a count another still relies on).
    """
    from threadpoolctl import threadpool_limits

    state = _THREADS_STATE
    with _THREADS_LOCK:
        if state["users"] == 0:
            state["torch"] = torch.get_num_threads()
            torch.set_num_threads(1)
            state["limits"] = threadpool_limits(limits=1)
        state["users"] += 1
    try:
        yield
    finally:
        with _THREADS_LOCK:
            state["users"] -= 1
            if state["users"] == 0:
                state["limits"].restore_original_limits()
                torch.set_num_threads(state["torch"])
