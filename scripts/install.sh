#!/usr/bin/env bash
# Install idaudit and everything it needs on a fresh machine, offline-safe.
#   scripts/install.sh          -> the library, the faces stack, the dask backend and zarr
#                                  (resumable audit_pairs stores)
#   scripts/install.sh test     -> the same plus the test tools and the docs site's builder
#   scripts/install.sh minimum  -> the test install with the core dependencies at their declared
#                                  floors (ci/minimum-versions.txt), to run the suite against them
# torch/torchvision go in first, pinned, so that no later dependency drags in another torch.
# facenet-pytorch, lpips and gan-face-generate pin ancient torch/numpy, and insightface (shipped test
# photos only) drags in a heavy stack: they go in with --no-deps
# (their real runtime needs are in the `faces` extra). Do not `pip check` afterwards.
# IDAUDIT_TORCH_INDEX_URL=<index> takes torch and torchvision (the same versions) from another
# index, e.g. PyTorch's CPU-only builds, which leave out the 3.2 GB of CUDA libraries.
# pip's resolver then prints an "ERROR: pip's dependency resolver ... conflicts" block about the
# --no-deps packages' stale pins: it is expected and changes nothing that was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="$(command -v python || command -v python3 || true)"
if [ -z "$PY" ]; then echo "install.sh: neither python nor python3 is on PATH" >&2; exit 1; fi
PIP="$PY -m pip install --quiet --disable-pip-version-check"
torch_index=()
if [ -n "${IDAUDIT_TORCH_INDEX_URL:-}" ]; then torch_index=(--index-url "$IDAUDIT_TORCH_INDEX_URL"); fi
$PIP ${torch_index[@]+"${torch_index[@]}"} "torch==2.14.1" "torchvision==0.29.1"
$PIP --no-deps "facenet-pytorch==2.6.0" "lpips==0.1.4" "gan-face-generate==1.1.1" "insightface==2.1"
# dp-accounting pins attrs<24 and dm-tree, which its PLD accountant does not use: no deps either
$PIP --no-deps "dp-accounting==0.6.0"
extras="faces,dask,io,accounting,inversion"
constraints=()
if [ "${1:-}" = "test" ]; then extras="$extras,test,docs"; fi
if [ "${1:-}" = "minimum" ]; then extras="$extras,test,docs"; constraints=(-c ci/minimum-versions.txt); fi
$PIP ${constraints[@]+"${constraints[@]}"} -e ".[$extras]"
