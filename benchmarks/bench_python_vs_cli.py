"""Per-image time of the Python path (``audit_generator``) against the command line (``embed``).

    python benchmarks/bench_python_vs_cli.py [--identities 4] [--images 8] [--busy]

The same faces (``synthetic_identities``, enlarged to 160 px so that neither road enlarges
them again) go once through ``idaudit embed`` (MTCNN + dlib, the command's load-aware thread
count) and once through ``audit_generator`` with the identity map in detect mode (MTCNN +
dlib, then the four audits), each in a fresh Python process, so both pay their imports and
model loading. ``--busy`` starts one busy background process (``while True: pass``) first and
stops it at the end. Printed: seconds per image of each road and their ratio (target: the
Python path within 1.3x of the command line).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

PYTHON_PATH = """
import sys, warnings, numpy as np
from pathlib import Path
from PIL import Image
from idaudit.pipeline import AuditSettings, audit_generator
root = Path(sys.argv[1])
images = {d.name: [np.asarray(Image.open(p).convert("RGB")) for p in sorted(d.glob("*.png"))]
          for d in sorted(root.iterdir())}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    audit_generator(lambda im: im, images, audit=AuditSettings(pairs="all"), progress=False)
"""


def _write_faces(root: Path, n_ids: int, n_images: int) -> int:
    from idaudit.faces import synthetic_identities

    ids = synthetic_identities(n_ids, n_images, rng=0)
    for k in range(n_ids):
        folder = root / f"id{k}"
        folder.mkdir(parents=True)
        for j, im in enumerate(ids.images[ids.labels == k]):
            big = Image.fromarray(im).resize((160, 160), Image.Resampling.BICUBIC)
            big.save(folder / f"{j}.png")
    return n_ids * n_images


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=os.environ.copy())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--identities", type=int, default=4)
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--busy", action="store_true", help="one busy background process")
    args = parser.parse_args()
    busy = None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "faces"
        n = _write_faces(root, args.identities, args.images)
        if args.busy:
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(5)  # let the load average see it
        try:
            out = str(Path(tmp) / "e.npz")
            embed = ["embed", str(root), "--out", out, "--cache", "none", "--quiet"]
            cli = _timed([sys.executable, "-m", "idaudit", *embed])
            python = _timed([sys.executable, "-c", PYTHON_PATH, str(root)])
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    load = os.getloadavg()[0]
    print(f"{n} images, load average {load:.1f}{' (+1 busy process)' if args.busy else ''}")
    print(f"  idaudit embed:    {cli:6.1f} s, {cli / n:.3f} s/image")
    print(f"  audit_generator:  {python:6.1f} s, {python / n:.3f} s/image")
    print(f"  ratio Python / command line: {python / cli:.2f}")


if __name__ == "__main__":
    main()
