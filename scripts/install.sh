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
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="python -m pip install --quiet --disable-pip-version-check"
$PIP "torch==2.14.1" "torchvision==0.29.1"
$PIP --no-deps "facenet-pytorch==2.6.0" "lpips==0.1.4" "gan-face-generate==1.1.1" "insightface==2.1"
# dp-accounting pins attrs<24 and dm-tree, which its PLD accountant does not use: no deps either
$PIP --no-deps "dp-accounting==0.6.0"
extras="faces,dask,io,accounting"
constraints=()
if [ "${1:-}" = "test" ]; then extras="$extras,test,docs"; fi
if [ "${1:-}" = "minimum" ]; then extras="$extras,test,docs"; constraints=(-c ci/minimum-versions.txt); fi
$PIP ${constraints[@]+"${constraints[@]}"} -e ".[$extras]"
