"""Throughput of the offline face models on CPU: one image at a time vs batched.

    python benchmarks/bench_faces.py [--n 32] [--threads 2] [--repeats 3]

Sections:

1. MTCNN detection (facenet-pytorch weights): ``detect`` per image vs ``detect_batch`` on
   equal-size images (shipped DCGAN faces, enlarged to 256×256 with a margin).
2. dlib ResNet encoding: ``compute_face_descriptor`` per chip vs on the list of chips.
3. The torch port of the dlib ResNet (``TorchDlibEncoder``) batched vs dlib per image; the
   target is at least 3× dlib's per-image throughput.

Each timing is the best of ``--repeats`` runs (default 3; warm-up excluded); rates are images
per second. Rates move by about 10% between runs on a shared machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from PIL import Image

from idaudit.faces import DlibEncoder, MTCNNDetector, ShippedFaceGenerator, TorchDlibEncoder


def best_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: lazy loads, allocator, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def report(title: str, n: int, rows: list[tuple[str, float]]) -> None:
    print(f"\n{title}")
    base = rows[0][1]
    for label, seconds in rows:
        print(f"  {label:<34s} {n / seconds:9.1f} images/s   ×{base / seconds:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=32, help="images per timing")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs, best kept")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, n = {args.n}")

    gen = ShippedFaceGenerator()
    faces64 = gen.sample(args.n, rng=0)
    big = np.stack(
        [
            np.asarray(Image.fromarray(f).resize((192, 192), Image.Resampling.BICUBIC))
            for f in faces64
        ]
    )
    photos = np.ascontiguousarray(np.pad(big, ((0, 0), (32, 32), (32, 32), (0, 0)), mode="edge"))

    detector = MTCNNDetector()
    t_single = best_time(lambda: [detector.detect(p) for p in photos], args.repeats)
    t_batch = best_time(lambda: detector.detect_batch(photos), args.repeats)
    found = sum(bool(d) for d in detector.detect_batch(photos))
    report(
        f"MTCNN on {photos.shape[1]}×{photos.shape[2]} photos ({found}/{args.n} with a face)",
        args.n,
        [("one at a time (detect)", t_single), ("batched (detect_batch)", t_batch)],
    )

    encoder = DlibEncoder()
    chips = gen.crops(faces64, encoder)  # (n, 150, 150, 3)
    t_dlib_single = best_time(lambda: [encoder.encode(c[None]) for c in chips], args.repeats)
    t_dlib_batch = best_time(lambda: encoder.encode(chips), args.repeats)
    report(
        "dlib ResNet on 150×150 chips",
        args.n,
        [("dlib, one at a time", t_dlib_single), ("dlib, list of chips", t_dlib_batch)],
    )

    port = TorchDlibEncoder(device="cpu", batch_size=args.n)
    t_port = best_time(lambda: port.encode(chips), args.repeats)
    gap = float(
        np.abs(port.encode(chips, normalize=False) - encoder.encode(chips, normalize=False)).max()
    )
    report(
        f"torch port vs dlib (max |raw descriptor difference| = {gap:.1e})",
        args.n,
        [("dlib, one at a time", t_dlib_single), (f"TorchDlibEncoder, batch {args.n}", t_port)],
    )
    ratio = t_dlib_single / t_port
    verdict = "meets" if ratio >= 3.0 else "misses"
    print(f"  target: batched port >= 3× dlib per image -> {ratio:.2f}× ({verdict} it)")


if __name__ == "__main__":
    main()
