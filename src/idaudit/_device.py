"""Device resolution and thread handling shared by every module that runs torch code."""

from __future__ import annotations

import numbers
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import torch

from idaudit.exceptions import InvalidInputError

__all__ = [
    "CPU_BLOCK_ROWS",
    "THREAD_POOLS",
    "available_cpus",
    "default_threads",
    "map_row_blocks",
    "resolve_device",
    "single_threaded",
    "thread_limit",
]

T = TypeVar("T")

#: Rows per block when a network runs over many inputs on the CPU (see :func:`map_row_blocks`).
CPU_BLOCK_ROWS = 8


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
    one thread (0.57 vs 0.07 s per 160-pixel frame), and a privacy check on 38 DCGAN images
    took 105 s on 2 threads and 35 s on 1 (load average 10), so a busy machine gets fewer
    threads. This is the one default: ``idaudit demo``, ``idaudit embed``,
    :func:`map_row_blocks` and the privacy check (which caps it at 8) all use it.

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


#: Thread pools :func:`thread_limit` can limit: torch's intra-op threads, and the BLAS and
#: OpenMP libraries that threadpoolctl finds loaded in the process.
THREAD_POOLS: tuple[str, ...] = ("torch", "blas", "openmp")


class _Requests:
    """Limits active in the process, per pool; every field is guarded by ``_LOCK``."""

    def __init__(self) -> None:
        self.active: dict[str, Counter[int]] = {pool: Counter() for pool in THREAD_POOLS}
        # torch's count before the first active torch limit (what threads started now get)
        self.torch_default = 0
        # count of each threadpoolctl library before the first limit changed it, by file
        self.originals: dict[str, int] = {}
        self.controller: Any = None
        self.n_modules = -1  # len(sys.modules) when the libraries were last listed

    def libraries(self, pool: str) -> list[Any]:
        """Return threadpoolctl's controllers of the loaded ``pool`` libraries.

        Listing the loaded libraries takes milliseconds, so the list is kept (as
        scikit-learn keeps its controller) and made again only after an import, which is how
        a new BLAS or OpenMP library gets into the process.
        """
        if self.controller is None or len(sys.modules) != self.n_modules:
            from threadpoolctl import ThreadpoolController

            self.n_modules = len(sys.modules)
            self.controller = ThreadpoolController()
        return [lib for lib in self.controller.lib_controllers if lib.user_api == pool]

    def apply(self, pool: str, n: int) -> None:
        """Give every loaded ``pool`` library ``n`` threads, remembering its first count.

        Called on every entry, so a library loaded inside a limit, and the calling thread's
        own OpenMP count, get the limit too; a library already at ``n`` is left alone.
        """
        for lib in self.libraries(pool):
            count = lib.num_threads
            if count != n:
                self.originals.setdefault(lib.filepath, count)
                lib.set_num_threads(n)

    def restore(self, pool: str) -> None:
        """Give the ``pool`` libraries back the counts they had before the first limit."""
        for lib in self.libraries(pool):
            if lib.filepath in self.originals:
                lib.set_num_threads(self.originals.pop(lib.filepath))


_LOCK = threading.Lock()
_REQUESTS = _Requests()
# per Python thread: the torch count before each of its open limits (innermost last), and
# the count a limit left it at because another thread's limit was still active
_LOCAL = threading.local()


def _check_threads(n_threads: Any) -> int:
    if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral):
        raise TypeError(f"`n_threads` must be an integer; got {type(n_threads).__name__}.")
    if n_threads < 1:
        raise InvalidInputError(f"`n_threads` must be >= 1; got {int(n_threads)!r}.")
    return int(n_threads)


def _check_pools(pools: Any) -> tuple[str, ...]:
    if isinstance(pools, str):
        pools = (pools,)
    try:
        chosen = tuple(dict.fromkeys(pools))
    except TypeError:
        chosen = None
    if not chosen or any(pool not in THREAD_POOLS for pool in chosen):
        raise InvalidInputError(
            f"`pools` must be a non-empty collection of {', '.join(map(repr, THREAD_POOLS))}; "
            f"got {pools!r}."
        )
    return chosen


def _enter(n: int, pools: tuple[str, ...]) -> None:
    """Register a limit of ``n`` on ``pools`` and apply the smallest one now active."""
    mine = torch.get_num_threads()  # before the OpenMP pools (torch's own among them) change
    for pool in (p for p in pools if p != "torch"):
        active = _REQUESTS.active[pool]
        active[n] += 1
        _REQUESTS.apply(pool, min(active))
    if "torch" not in pools:
        return
    active = _REQUESTS.active["torch"]
    state = _LOCAL.__dict__
    owed = state.pop("owed", None)
    if "stack" not in state and active and mine == min(active):
        # a thread new to the limiter that first ran torch inside another thread's limit
        # got that limit from torch's process-wide default: its own count is the default
        mine = _REQUESTS.torch_default
    stack: list[int] = state.setdefault("stack", [])
    if not stack and owed is not None and owed[0] == mine:
        mine = owed[1]  # the count this thread had before another thread's limit held it down
    if not active:
        _REQUESTS.torch_default = mine
    active[n] += 1
    # set every time: the call also sets the count that threads started from now on get
    torch.set_num_threads(min(active))
    stack.append(mine)


def _leave(n: int, pools: tuple[str, ...]) -> None:
    """Undo :func:`_enter` for this thread."""
    for pool in (p for p in pools if p != "torch"):
        active = _REQUESTS.active[pool]
        before = min(active)
        active[n] -= 1
        if not active[n]:
            del active[n]
        if not active:
            _REQUESTS.restore(pool)
        elif min(active) != before:
            _REQUESTS.apply(pool, min(active))
    if "torch" not in pools:
        return
    active = _REQUESTS.active["torch"]
    active[n] -= 1
    if not active[n]:
        del active[n]
    stack: list[int] = _LOCAL.stack
    mine = stack.pop()
    if not active:  # the last limit: torch's default and this thread get the first count back
        torch.set_num_threads(_REQUESTS.torch_default)
        return
    target = min(mine, min(active))
    torch.set_num_threads(target)
    if target != mine and not stack:
        _LOCAL.owed = (target, mine)


@contextmanager
def thread_limit(n_threads: int, *, pools: Iterable[str] = THREAD_POOLS) -> Iterator[None]:
    """Run torch and the BLAS/OpenMP libraries on at most ``n_threads`` threads inside the block.

    The one place idaudit changes thread counts: no other module calls
    ``torch.set_num_threads`` or ``threadpoolctl.threadpool_limits``. Re-entrant and safe
    when several Python threads enter it at once.

    Parameters
    ----------
    n_threads : int
        Threads each pool may use inside the block, at least 1.
    pools : collection of {"torch", "blas", "openmp"}, default all three
        Which pools to limit: torch's intra-op threads (``torch.set_num_threads``), and the
        BLAS or OpenMP libraries that threadpoolctl finds loaded (numpy's and scipy's
        OpenBLAS, MKL, scikit-learn's OpenMP, ...).

    Yields
    ------
    None

    Raises
    ------
    TypeError
        If ``n_threads`` is not an integer.
    InvalidInputError
        If ``n_threads`` < 1 or ``pools`` names another pool.

    Notes
    -----
    Thread counts belong to the process (BLAS pools, and the torch count that threads
    starting later get) or to one OS thread (OpenMP's, hence torch's, once the thread has
    run torch code), so the limits in force are kept in one registry, under one lock:

    * **The smallest active limit wins.** While any block is open, each pool runs on the
      smallest ``n_threads`` among the blocks open on it, in any Python thread. Equal limits
      just count their users (the audit engine's worker threads all enter
      ``single_threaded()``); a block asking for more than one already open gets no more.
      With no other block open, the count inside is ``n_threads``, even above the count
      outside (``idaudit embed --threads N``).
    * **Entering sets the calling thread.** Each thread that enters gets the limit itself,
      and threads started inside a block (a ``ThreadPoolExecutor``'s workers) start with it.
      A thread outside every block keeps its own torch count while another thread is inside;
      only the process-wide BLAS pools hold it down.
    * **Leaving restores.** Leaving a block gives its thread the count it had before,
      held down to the smallest limit still open elsewhere (a thread held down so gets its
      count back when it next leaves a limit of its own). When the last block on a pool
      closes, the pool gets back the count it had before the first one opened: for torch,
      the count of the thread that opened it, now torch's default again and the closing
      thread's count.

    threadpoolctl's ``threadpool_limits`` with a save and restore of torch's count is simpler
    but keeps none of the three: every block restores what it saw on entry, so an inner
    block asking for more gets more, blocks of different limits closing out of order leave
    a count behind, and a thread held down by another's block keeps the lower count (three
    tests of ``tests/unit/test_device.py`` fail with it). It gives the same numbers at about
    the same speed: entering and leaving ``single_threaded()`` took 1.2 times as long as
    with this registry (threadpoolctl's controller kept between calls), and an
    ``audit_pairs`` run of 111 chunks on two threads 0.85 to 0.96 times as long.

    Some BLAS builds keep their own rules: the OpenBLAS in numpy's wheels (0.3.31 when this
    was written) ignores a change made from any other thread once the main thread has made
    one. A limit entered only on worker threads then leaves that pool as it is (its torch
    limit still applies), and a pool that a worker thread restores last keeps the limit.
    idaudit's own callers enter on the calling thread and hold the limit while their workers
    run, so the calling thread is the first in and the last out.

    Examples
    --------
    >>> import torch
    >>> from idaudit._device import thread_limit
    >>> before = torch.get_num_threads()
    >>> with thread_limit(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    n = _check_threads(n_threads)
    chosen = _check_pools(pools)
    with _LOCK:
        _enter(n, chosen)
    try:
        yield
    finally:
        with _LOCK:
            _leave(n, chosen)


def single_threaded() -> AbstractContextManager[None]:
    """Run torch and the BLAS/OpenMP libraries on one thread each inside the block.

    ``thread_limit(1)``. The batched kernels gain nothing from intra-op threads at audit
    sizes, and their spinning OpenMP threads slow a call down tenfold when another process
    holds a core; chunks run side by side on Python threads instead, each entering this
    block (see :func:`thread_limit` for what happens across threads).

    Returns
    -------
    contextlib.AbstractContextManager
    """
    return thread_limit(1)


def map_row_blocks(
    fn: Callable[[int, int], T],
    n_rows: int,
    *,
    device: torch.device,
    batch_size: int,
    progress: bool = False,
    desc: str = "",
) -> list[T]:
    """Apply ``fn(start, stop)`` to consecutive blocks of rows, the same way on any machine load.

    A float32 convolution's last bits depend on how many threads split it, so a network run
    with torch's intra-op threads gives embeddings that change with the thread count, and
    :func:`default_threads` follows the load average. On the CPU the rows are therefore cut
    into blocks of :data:`CPU_BLOCK_ROWS` (whatever ``batch_size`` says), each block runs on one
    torch and BLAS thread, and the blocks are spread over :func:`default_threads` worker
    threads: the numbers are bitwise the same at any thread count, batch size or load, and on
    two cores this is about 1.7 times faster than intra-op threads for dlib's ResNet. On CUDA
    the blocks are ``batch_size`` rows, run in order.

    Parameters
    ----------
    fn : callable
        ``fn(start, stop)`` computes rows ``start:stop``. It runs on a worker thread, so it
        enters any thread-local torch mode it needs (``torch.inference_mode()``) itself.
    n_rows : int
        Number of rows.
    device : torch.device
        Where ``fn`` computes.
    batch_size : int
        Rows per block on CUDA.
    progress : bool, default False
        Show a tqdm bar over the blocks.
    desc : str, default ""
        The bar's label.

    Returns
    -------
    list
        ``fn``'s results, in row order.
    """
    block = batch_size if device.type != "cpu" else CPU_BLOCK_ROWS
    starts = list(range(0, n_rows, block))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(starts), desc=desc, unit="block")

    def one(start: int) -> T:
        out = fn(start, min(start + block, n_rows))
        if bar is not None:
            bar.update()
        return out

    try:
        if device.type != "cpu":
            return [one(s) for s in starts]
        workers = min(default_threads(), len(starts))
        with single_threaded():
            if workers <= 1:
                return [one(s) for s in starts]
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(workers, thread_name_prefix="idaudit-rows") as pool:
                return list(pool.map(one, starts))
    finally:
        if bar is not None:
            bar.close()
