"""Torch checkpoints: ``torch.load(weights_only=True)`` and exact state-dict loading."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idaudit.exceptions import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["load_checkpoint", "load_exact"]


def load_checkpoint(path: Path) -> Any:
    """``torch.load(weights_only=True)`` with actionable errors (pickled objects, bad files)."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        # torch's own message is long; its "Unsupported global" line names the culprit.
        detail = next(
            (ln.strip() for ln in str(err).splitlines() if "Unsupported global" in ln), ""
        )
        if not detail:  # not a pickled object: the file is no torch checkpoint, or damaged
            raise InvalidInputError(
                f"Could not read the checkpoint {path}: not a torch checkpoint, or damaged."
            ) from err
        raise InvalidInputError(
            f"{path} holds Python objects besides tensors, which idaudit refuses to unpickle "
            "(torch.load(weights_only=True)). If you trust the file, extract its weights once: "
            "load it with weights_only=False in a session you trust, torch.save its "
            f"state_dict to a new file and pass that file. {detail}"
        ) from err
    except Exception as err:  # torch raises assorted types for non-checkpoint files
        raise InvalidInputError(f"Could not read the checkpoint {path}: {err!r}") from err


def load_exact(
    module: torch.nn.Module,
    state: Mapping[str, Any],
    source: Path,
    *,
    assign: bool = False,
    prefix: str = "",
    what: str | None = None,
) -> None:
    """Load ``state`` into ``module``: every key must match by name and shape.

    Only BatchNorm's ``num_batches_tracked`` counters may be absent (they are zero-filled).
    ``prefix`` is prepended to key names in messages (the file's own spelling); ``what`` names
    the network.
    """
    import torch

    expected = module.state_dict()
    missing = [k for k in expected if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            first = ", ".join(prefix + k for k in missing[:3])
            parts.append(f"{len(missing)} missing (first: {first})")
        if unexpected:
            first = ", ".join(prefix + k for k in unexpected[:3])
            parts.append(f"{len(unexpected)} unexpected (first: {first})")
        raise InvalidInputError(
            f"The weights in {source} do not fit {what or type(module).__name__}: keys "
            + "; ".join(parts)
            + "."
        )
    full: dict[str, Any] = {}
    for key, ref in expected.items():
        value = state.get(key)
        if value is None:  # a missing num_batches_tracked
            value = torch.zeros((), dtype=torch.long)
        if not isinstance(value, torch.Tensor):
            raise InvalidInputError(f"Entry {prefix + key!r} of {source} is not a tensor.")
        if tuple(value.shape) != tuple(ref.shape):
            raise InvalidInputError(
                f"Entry {prefix + key!r} of {source} has shape {tuple(value.shape)}; the "
                f"network needs {tuple(ref.shape)}."
            )
        full[key] = value.to(ref.dtype) if value.is_floating_point() else value
    module.load_state_dict(full, strict=True, assign=assign)
