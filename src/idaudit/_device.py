"""Device resolution and thread handling shared by every module that runs torch code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from idaudit.exceptions import InvalidInputError

__all__ = ["available_cpus", "default_threads", "resolve_device", "single_threaded"]


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


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's core count), at least 1.

    ``os.sched_getaffinity`` honours ``taskset``, cgroups' cpusets and container limits;
    ``os.cpu_count`` stands in where it does not exist.

    Examples
    --------
    >>> from idaudit._device import available_cpus
    >>> available_cpus() >= 1
    True
    """
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """CPU threads a torch or BLAS pool should use here without oversubscribing the machine.

    The CPUs this process may run on (``os.sched_getaffinity``, which honours ``taskset``,
    cgroups' cpusets and container limits; ``os.cpu_count`` where it does not exist), less the
    ones already busy by the one-minute load average, and at least 1. On a loaded two-core
    machine torch's own default (all cores) made MTCNN detection about 8 times slower than
    one thread (0.57 vs 0.07 s per 160-pixel frame), so a busy machine gets fewer threads.

    Returns
    -------
    int
        Between 1 and the number of usable CPUs.

    Examples
    --------
    >>> from idaudit._device import default_threads
    >>> default_threads() >= 1
    True
    """
    import os

    usable = available_cpus()
    try:
        busy = int(os.getloadavg()[0])
    except (AttributeError, OSError):  # pragma: no cover - no load average
        busy = 0
    # one busy CPU is allowed for (this process's own start-up shows in the load average)
    return max(1, min(usable, usable - busy + 1))


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
