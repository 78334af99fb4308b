"""Certify one condition the way seed 000, Section 4.3 does, with the Section 4.4 controls.

A synthetic condition stands in for a folder of generated-face embeddings: 60 identities with
100 L2-normalised 128-d embeddings each (identity centre plus within-identity spread). The
script

1. certifies five development-selected, vertex-disjoint pairs on reserved test data, with the
   paper's correction for eight conditions certified together (α = 0.05 / (8 · 5 · 2) per
   bound), and prints each certificate;
2. runs the same-identity split-half controls (MMD² permutation tests and ROC AUC), which should
   reject about 5 % of the time and sit at chance;
3. draws the out-of-fold ROC of the first certified pair and the H0/H1 MMD² histograms.

Figures drawn from embeddings are derived biometric data: they are written atomically and
owner-only (``0600``), into a folder created owner-only (``0700``, missing parents included),
the way the ``idaudit`` command writes its outputs.

Replace ``make_condition`` with ``ida.EmbeddingSet.from_csv("your_embeddings.csv")`` to
certify real data.

Run::

    python examples/certify_condition.py [OUT_DIR]     # about 10 s on 2 cores
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

import idaudit as ida
from idaudit.certify import sanity_controls
from idaudit.plotting import plot_mmd_null, plot_roc
from idaudit.results import write_atomic


def make_condition(n_identities: int = 60, n_rows: int = 100, dim: int = 128) -> ida.EmbeddingSet:
    gen = np.random.default_rng(2026)
    centres = gen.standard_normal((n_identities, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = np.repeat(centres, n_rows, axis=0) + gen.normal(
        scale=2.5 / np.sqrt(dim), size=(n_identities * n_rows, dim)
    )
    return ida.EmbeddingSet(x, np.repeat([f"id{k:03d}" for k in range(n_identities)], n_rows))


def owner_only_folder(out: Path) -> Path:
    """Create ``out`` and its missing parents with mode 0700; an existing folder is left as is."""
    for folder in (*reversed(out.parents), out):
        if not folder.exists():
            folder.mkdir(mode=0o700)
    return out


def save_figure(fig: Figure, path: Path) -> Path:
    """Write a PNG atomically (temporary file, then rename) with owner-only permissions."""
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)
    return path


def main(out: Path) -> None:
    owner_only_folder(out)
    es = make_condition()
    pairs = ida.sample_pairs(es.identities, 100, rng=0)

    cert = ida.ReservedTestCertifier(n_select=5, n_families=8, alpha=0.05, rng=0).fit(es, pairs)
    c = cert.certificates_
    print(c.attrs["confidence"])
    print(
        c[
            ["n_test_a", "test_fp", "test_fn", "ufpr", "ufnr", "test_auc", "epsilon_lb"]
        ].to_dataframe()
    )
    print(f"largest certified lower bound: {cert.epsilon_lb_:.3f}  [{cert.status}]")

    controls = sanity_controls(es, n_permutations=1000, rng=0)
    print(
        f"split-half controls: {controls.attrs['n_rejected']}/{controls.attrs['n_identities']} "
        f"MMD^2 tests reject at 0.05, mean AUC {controls.attrs['mean_auc']:.3f}, "
        f"{controls.attrs['n_corners']} exact corners"
    )

    a, b = c["identity_a"].values[0], c["identity_b"].values[0]
    roc = ida.ROCHTAuditor(rng=0).fit(es.get(a), es.get(b))
    roc_png = save_figure(
        plot_roc(roc.fpr_, roc.tpr_, label=f"{a} vs {b}, AUC {roc.auc_:.3f}"), out / "roc.png"
    )
    cross = ida.audit_pairs(es, pairs, [ida.MMDTVAuditor()], progress=False)
    null_png = save_figure(
        plot_mmd_null(controls["mmd2"], cross["mmdtv_mmd2"]), out / "mmd_null.png"
    )
    print(f"wrote {roc_png} and {null_png} (owner-only)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("certify-condition"))
