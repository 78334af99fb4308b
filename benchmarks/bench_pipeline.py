"""Images → audit: what the pipeline's cache, batching and thread default buy.

    python benchmarks/bench_pipeline.py [--identities 6] [--images 10]

On synthetic DCGAN faces (``synthetic_identities``), paired mode, MTCNN + dlib in torch:

1. ``encode_generator`` on a fresh cache vs the same call again (every embedding from the
   cache; the target is that the second run encodes nothing and takes a fraction of the first);
2. ``LatentFaceSwap`` through its batched ``batch`` vs one image at a time (the straightforward
   loop a user would write);
3. MTCNN detection with torch's default thread count vs ``default_threads()`` (all CPUs minus
   the busy ones), on the same frames.

Each timing is one run after a warm-up (the first run of 1 is the measurement itself); on a
shared machine timings move with the load, so each section prints its ratio from the same run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings

import numpy as np
import torch

from idaudit._device import default_threads
from idaudit.faces import (
    EmbeddingCache,
    FacePipeline,
    MTCNNDetector,
    ShippedFaceGenerator,
    TorchDlibEncoder,
    prepare_frame,
    synthetic_identities,
)
from idaudit.pipeline import DrawSettings, GaussianBlur, LatentFaceSwap, encode_generator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--identities", type=int, default=6)
    parser.add_argument("--images", type=int, default=10)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(default_threads())
    gen, enc = ShippedFaceGenerator(), TorchDlibEncoder()
    ids = synthetic_identities(args.identities, args.images, rng=0, generator=gen, encoder=enc)
    images = {k: list(ids.images[ids.labels == k]) for k in range(args.identities)}
    pipe = FacePipeline(MTCNNDetector(), enc, progress=False)
    n = args.identities * args.images

    with tempfile.TemporaryDirectory() as folder:
        cache = EmbeddingCache(folder)
        runs, times = [], [time.perf_counter()]
        for _ in ("fresh", "cached"):
            runs.append(
                encode_generator(
                    GaussianBlur(2.0),
                    images,
                    models=pipe,
                    cache=cache,
                    progress=False,
                    draws=DrawSettings(mode="paired"),
                )
            )
            times.append(time.perf_counter())
    first, second = runs
    t0, t1, t2 = times
    print(
        f"1. {n} faces, paired mode: fresh {t1 - t0:.2f} s ({first.n_encoded} encoded), "
        f"cached {t2 - t1:.2f} s ({second.n_encoded} encoded): {(t1 - t0) / (t2 - t1):.1f}x"
    )

    swap = LatentFaceSwap(gen, ids.centres[0], 0.5, latents=(ids.images, ids.latents))
    rngs = [np.random.default_rng(i) for i in range(n)]
    swap.batch(list(ids.images[:4]), rngs[:4])  # warm-up
    t0 = time.perf_counter()
    swap.batch(list(ids.images), rngs)
    t1 = time.perf_counter()
    for im, r in zip(ids.images, rngs, strict=True):
        swap(im, rng=r)
    t2 = time.perf_counter()
    print(
        f"2. LatentFaceSwap on {n} faces: batched {t1 - t0:.3f} s, one at a time "
        f"{t2 - t1:.3f} s: {(t2 - t1) / (t1 - t0):.1f}x"
    )

    det = MTCNNDetector()
    frames = [prepare_frame(im) for im in ids.images[:16]]  # as every road enlarges them
    timings = []
    for threads in (len(os.sched_getaffinity(0)), default_threads()):
        torch.set_num_threads(threads)
        det.detect(frames[0])  # warm-up
        t0 = time.perf_counter()
        for f in frames:
            det.detect(f)
        timings.append((threads, time.perf_counter() - t0))
    (ta, a), (tb, b) = timings
    print(
        f"3. MTCNN on 16 frames: all {ta} CPUs {a:.2f} s, default_threads() = {tb}: {b:.2f} s "
        f"(load average {os.getloadavg()[0]:.1f}): {a / b:.1f}x"
    )


if __name__ == "__main__":
    main()
