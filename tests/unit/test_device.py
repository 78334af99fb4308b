"""Tests of idaudit._device: the one owner of thread counts (default, limiter) and its users."""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

import idaudit._device as device
from idaudit._device import (
    THREAD_POOLS,
    available_cpus,
    default_threads,
    single_threaded,
    thread_limit,
)
from idaudit.exceptions import InvalidInputError

SRC = Path(__file__).parents[2] / "src" / "idaudit"
BASE = 3  # a count no limit below asks for, so a count left behind shows


def _pools() -> dict[str, int]:
    """threadpoolctl's count of every loaded BLAS/OpenMP library, by file (calling thread)."""
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()}


def _blas() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def _in_new_thread() -> int:
    """The torch count a thread started now gets (torch's process-wide default)."""
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(torch.get_num_threads()))
    t.start()
    t.join()
    return got[0]


def _no_limit_active() -> bool:
    return not any(device._REQUESTS.active[pool] for pool in THREAD_POOLS)


@pytest.fixture
def base_counts() -> Iterator[dict[str, int]]:
    """Run a test with torch and every BLAS/OpenMP pool at ``BASE`` threads; restore after."""
    before = torch.get_num_threads()
    with threadpool_limits(limits=BASE):
        torch.set_num_threads(BASE)
        try:
            yield _pools()
        finally:
            torch.set_num_threads(before)
    assert _no_limit_active()


# -- default_threads ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpus", "load", "expected"),
    [
        (4, 0.0, 4),  # idle: every CPU of the affinity mask
        (4, 0.9, 4),  # this process's own start-up shows in the load average
        (4, 2.5, 3),  # two CPUs busy (int(2.5)), one allowed for: 4 - 2 + 1
        (4, 10.0, 1),  # busier than the machine: at least 1
        (1, 0.0, 1),
    ],
)
def test_default_threads_follows_affinity_and_load(
    monkeypatch: pytest.MonkeyPatch, cpus: int, load: float, expected: int
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the machine's count must not be used
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert available_cpus() == cpus
    assert default_threads() == expected


def test_default_threads_without_a_load_average_uses_every_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_load() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    monkeypatch.setattr(os, "getloadavg", no_load)
    assert default_threads() == 3


# -- thread_limit: one thread ------------------------------------------------------------------


def test_nested_limits_restore_torch_and_threadpoolctl_exactly(
    base_counts: dict[str, int],
) -> None:
    assert set(base_counts.values()) == {BASE}
    with thread_limit(2):
        assert torch.get_num_threads() == 2
        assert set(_pools().values()) == {2}
        with single_threaded():
            assert torch.get_num_threads() == 1
            assert set(_pools().values()) == {1}
            assert _in_new_thread() == 1  # threads started inside get the limit
        assert torch.get_num_threads() == 2  # the outer limit is back
        assert set(_pools().values()) == {2}
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts
    assert _in_new_thread() == BASE
    assert _no_limit_active()


def test_an_inner_limit_asking_for_more_gets_no_more(base_counts: dict[str, int]) -> None:
    with single_threaded():
        with thread_limit(2):  # the smallest active limit wins
            assert torch.get_num_threads() == 1
            assert set(_pools().values()) == {1}
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts


def test_a_limit_may_raise_the_count_outside_other_limits(base_counts: dict[str, int]) -> None:
    # a limit is the count inside the block (`idaudit embed --threads 8` on a small machine)
    with thread_limit(BASE + 2):
        assert torch.get_num_threads() == BASE + 2
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts


def test_counts_are_restored_when_the_block_raises(base_counts: dict[str, int]) -> None:
    with pytest.raises(RuntimeError, match="boom"), thread_limit(1), thread_limit(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts
    assert _no_limit_active()


def test_pools_limits_only_the_pools_named(base_counts: dict[str, int]) -> None:
    with thread_limit(1, pools="blas"):
        assert torch.get_num_threads() == BASE
        assert set(_blas()) == {1}
        openmp = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "openmp"]
        assert set(openmp) <= {BASE}
    with thread_limit(1, pools=["torch"]):
        assert torch.get_num_threads() == 1
        assert set(_blas()) == {BASE}
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts


@pytest.mark.parametrize(
    ("n_threads", "error", "match"),
    [
        (0, InvalidInputError, r"`n_threads` must be >= 1; got 0\."),
        (-2, InvalidInputError, r"`n_threads` must be >= 1; got -2\."),
        (1.5, TypeError, r"`n_threads` must be an integer; got float\."),
        (True, TypeError, r"`n_threads` must be an integer; got bool\."),
        ("2", TypeError, r"`n_threads` must be an integer; got str\."),
    ],
)
def test_bad_thread_counts_are_refused(n_threads: Any, error: type, match: str) -> None:
    before = torch.get_num_threads()
    with pytest.raises(error, match=match), thread_limit(n_threads):
        pass
    assert torch.get_num_threads() == before
    assert _no_limit_active()


@pytest.mark.parametrize("pools", ["cuda", [], ("torch", "mkl"), 3])
def test_bad_pools_are_refused(pools: Any) -> None:
    match = r"`pools` must be a non-empty collection of"
    with pytest.raises(InvalidInputError, match=match), thread_limit(1, pools=pools):
        pass
    assert _no_limit_active()


# -- thread_limit: several Python threads ------------------------------------------------------


def _run_concurrently(limits: list[int], rounds: int) -> list[tuple[int, int]]:
    """Threads enter ``thread_limit(limits[i])`` together, ``rounds`` times; what each saw.

    Barriers make every thread be inside at once (and enter and leave in a different order
    each round); each records (requested, its torch count) while inside.
    """
    barrier = threading.Barrier(len(limits))
    seen: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for _ in range(rounds):
                barrier.wait()
                with thread_limit(n):
                    seen.append((n, torch.get_num_threads()))
                    barrier.wait()  # all inside now
                    seen.append((n, torch.get_num_threads()))
                    barrier.wait()
                    seen.append((n, torch.get_num_threads()))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(n,)) for n in limits]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return seen


def test_equal_limits_from_four_threads_overlap_and_restore(base_counts: dict[str, int]) -> None:
    seen = _run_concurrently([1, 1, 1, 1], rounds=10)
    assert len(seen) == 4 * 10 * 3
    assert {count for _, count in seen} == {1}
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts
    assert _in_new_thread() == BASE
    assert _no_limit_active()


def test_different_limits_from_four_threads_never_exceed_any_request(
    base_counts: dict[str, int],
) -> None:
    seen = _run_concurrently([1, 2, 3, 4], rounds=10)
    assert all(1 <= count <= n for n, count in seen)
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts
    assert _in_new_thread() == BASE
    assert _no_limit_active()


def test_a_thread_held_down_by_another_gets_its_count_back(base_counts: dict[str, int]) -> None:
    started, go, left, finished = (threading.Event() for _ in range(4))
    seen: dict[str, Any] = {}

    def other() -> None:  # started before the limit: its own torch count is BASE
        seen["start"] = torch.get_num_threads()
        started.set()
        go.wait()
        seen["outside"] = torch.get_num_threads()
        seen["blas"] = _blas()
        with thread_limit(2):
            seen["inside"] = torch.get_num_threads()
        seen["held"] = torch.get_num_threads()
        left.set()
        finished.wait()
        with thread_limit(2):
            seen["again"] = torch.get_num_threads()
        seen["back"] = torch.get_num_threads()

    thread = threading.Thread(target=other)
    thread.start()
    started.wait()
    with single_threaded():
        go.set()
        left.wait()
    finished.set()
    thread.join()
    assert seen == {
        "start": BASE,
        "outside": BASE,  # outside any block a thread keeps its own count ...
        "blas": [1] * len(_blas()),  # ... but the process-wide BLAS pools follow the limit
        "inside": 1,  # the smallest active limit wins
        "held": 1,  # held down while the main thread is still inside
        "again": 2,
        "back": BASE,  # given back when it next leaves a limit of its own
    }
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts


def test_map_row_blocks_runs_blocks_single_threaded_and_restores(
    base_counts: dict[str, int],
) -> None:
    seen: list[int] = []

    def rows(start: int, stop: int) -> tuple[int, int]:
        seen.append(torch.get_num_threads())
        return start, stop

    out = device.map_row_blocks(rows, 20, device=torch.device("cpu"), batch_size=100)
    assert out == [(0, 8), (8, 16), (16, 20)]  # CPU blocks of CPU_BLOCK_ROWS whatever batch_size
    assert set(seen) == {1}
    assert torch.get_num_threads() == BASE
    assert _pools() == base_counts


# -- one owner ---------------------------------------------------------------------------------


def _thread_count_calls(path: Path) -> list[str]:
    """Calls and imports in ``path`` that change a thread count without the limiter."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in {"set_num_threads", "set_num_interop_threads", "threadpool_limits"}:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {name}()")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("threadpoolctl"):
            found.append(f"{path.relative_to(SRC)}:{node.lineno} from {node.module} import")
        elif isinstance(node, ast.Import) and any(a.name == "threadpoolctl" for a in node.names):
            found.append(f"{path.relative_to(SRC)}:{node.lineno} import threadpoolctl")
    return found


def test_only_the_device_module_changes_thread_counts() -> None:
    offenders = [
        hit
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "_device.py"
        for hit in _thread_count_calls(path)
    ]
    assert offenders == [], "use idaudit._device.thread_limit instead: " + ", ".join(offenders)
    assert _thread_count_calls(SRC / "_device.py")  # the scan does find the owner's own calls


def test_the_memorisation_check_has_no_default_of_its_own() -> None:
    import idaudit.pipeline._folders as images

    assert not hasattr(images, "default_threads")
