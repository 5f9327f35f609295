"""arXiv:2512.03947, Tables 3 and 4: MNIST digit pairs, original and inverted (1 - x) images.

    MARGINKIT_DATA=<data folder> python benchmarks/svm_table3.py [--limits 5000 10000]

Data (sec. 5.2): the 60,000 MNIST training images for training and the 10,000 test images
for testing (``mk.datasets.load_mnist_idx``, pixels / 255), pairs 3/5, 1/9, 2/7 (the first
digit is the +1 class), each pair's images in their file order (``--train``/``--test``
keep the first images only, for quick runs). Each classifier is trained on the original
images ("black") and on their inversions 1 - x ("white"), same split. As in sec. 5.2,
FISTA's implicit centering is off: ``fista`` and ``fista_svm`` get ``scale="scale"``
(division by the training standard deviation, constant pixels dropped), gamma = 64/n,
mu = n/128, maxit = 10^4, first certified point; LIBLINEAR (``-s 3 -B 1 -c 64/n``, its
C ``rand()`` seeded with ``srand(1)`` before each ``train``) gets X Diag(sigma)^-1.
Agreement = fraction of the test images given the same label by the classifiers trained
on the original and on the inverted images.

Table 4 (sec. 5.3): LIBLINEAR on the inverted images with its iteration limit raised.
The limit is a constant of LIBLINEAR's C source (300, no option sets it; ``-e`` sets the
tolerance), so, as the paper did, LIBLINEAR is recompiled with 5000 and 10000
(``svm_common.liblinear_library``). Its rows sit beside FISTA H-SVM's on the same images.
"""
import argparse

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from svm_common import (LIBLINEAR_MAX_ITER, data_dir, liblinear_library, liblinear_predict,
                        liblinear_train, std_scaled, timed_solve)

PAIRS = ((3, 5), (1, 9), (2, 7))
#: Table 3 of arXiv:2512.03947: (black acc., white acc., agreement)
PAPER3 = {
    ((3, 5), "FISTA SVM"): (0.9685, 0.9532, 0.9711),
    ((3, 5), "FISTA H-SVM"): (0.9685, 0.9522, 0.9711),
    ((3, 5), "LIBLINEAR"): (0.9690, 0.7166, 0.7266),
    ((1, 9), "FISTA SVM"): (0.9949, 0.9888, 0.9911),
    ((1, 9), "FISTA H-SVM"): (0.9949, 0.9860, 0.9865),
    ((1, 9), "LIBLINEAR"): (0.9949, 0.4706, 0.4674),
    ((2, 7), "FISTA SVM"): (0.9820, 0.9796, 0.9927),
    ((2, 7), "FISTA H-SVM"): (0.9811, 0.9796, 0.9917),
    ((2, 7), "LIBLINEAR"): (0.9816, 0.9680, 0.9777),
}
#: Table 4 of arXiv:2512.03947: (test acc., time (s), termination) on the inverted images
PAPER4 = {
    ((3, 5), 5000): (0.9600, 101.762, "iteration limit"),
    ((3, 5), 10000): (0.9632, 179.267, "iteration limit"),
    ((3, 5), "FISTA H-SVM"): (0.9522, 53.828, "stopping condition"),
    ((1, 9), 5000): (0.9310, 124.009, "iteration limit"),
    ((1, 9), 10000): (0.9953, 235.922, "iteration limit"),
    ((1, 9), "FISTA H-SVM"): (0.9860, 59.017, "stopping condition"),
    ((2, 7), 5000): (0.9791, 79.091, "iteration limit"),
    ((2, 7), 10000): (0.9626, 125.935, "iteration limit"),
    ((2, 7), "FISTA H-SVM"): (0.9796, 57.939, "stopping condition"),
}
METHODS = (("FISTA SVM", dict(solver="fista_svm", scale="scale")),
           ("FISTA H-SVM", dict(solver="fista", scale="scale")))

HEADER3 = ["digits", "method", "black acc. (paper)", "black acc. (ours)", "white acc. (paper)",
           "white acc. (ours)", "agreement (paper)", "agreement (ours)",
           "termination black; white (ours)"]
HEADER4 = ["digits", "method", "test acc. (paper)", "test acc. (ours)", "time (s) (paper)",
           "time (s) (ours)", "termination (paper)", "termination (ours)"]


def load_pairs(n_train=None, n_test=None):
    """{pair: (X_train, y_train, X_test, y_test)}: images / 255, labels +1 (first digit)
    / -1, the first ``n_train`` / ``n_test`` images of each pair in file order."""
    import os

    from marginkit.datasets import load_mnist_idx

    folder = os.path.join(data_dir(), "mnist")
    Xtr, ltr = load_mnist_idx(os.path.join(folder, "train-images-idx3-ubyte.xz"),
                              os.path.join(folder, "train-labels-idx1-ubyte.xz"))
    Xte, lte = load_mnist_idx(os.path.join(folder, "t10k-images-idx3-ubyte.gz"),
                              os.path.join(folder, "t10k-labels-idx1-ubyte.gz"))
    out = {}
    for a, b in PAIRS:
        tr = np.flatnonzero((ltr == a) | (ltr == b))[:n_train]
        te = np.flatnonzero((lte == a) | (lte == b))[:n_test]
        out[(a, b)] = (Xtr[tr], np.where(ltr[tr] == a, 1.0, -1.0),
                       Xte[te], np.where(lte[te] == a, 1.0, -1.0))
    return out


def _termination(res):
    kappa = (res.extra or {}).get("kappa")
    return ({"certified": "stopping condition", "max_iter": "iteration limit"}.get(
        res.status, res.status) + f" ({res.n_iter} it."
        + (f", kappa {kappa:.1e})" if kappa is not None else ")"))


def _liblinear_termination(hit, n_iter):
    return ("iteration limit" if hit else "stopping condition") + f" ({n_iter} it.)"


def run(pairs=PAIRS, n_train=None, n_test=None, limits=(5000, 10000), max_iter=10_000):
    """Rows of Table 3 and of Table 4 (the cells of ``HEADER3`` and ``HEADER4``);
    ``max_iter``: FISTA's maxit (the paper's 10^4; lower only for smoke runs)."""
    data = load_pairs(n_train, n_test)
    libs = {m: liblinear_library(m) for m in limits}
    rows3, rows4 = [], []
    for pair in pairs:
        Xtr, ytr, Xte, yte = data[pair]
        n = ytr.size
        pred, acc, term, secs = {}, {}, {}, {}
        for rep, (A, B) in (("black", (Xtr, Xte)), ("white", (1.0 - Xtr, 1.0 - Xte))):
            for method, kw in METHODS:
                res, el = timed_solve(A, ytr, max_iter=max_iter, **kw)
                pred[method, rep] = res.predict(B)
                acc[method, rep] = float(np.mean(pred[method, rep] == yte))
                term[method, rep] = _termination(res)
                secs[method, rep] = el
            As, Bs = std_scaled(sp.csr_matrix(A), sp.csr_matrix(B))
            model, el, it, hit = liblinear_train(As, ytr, 64.0 / n, extra="-q", seed=1)
            pred["LIBLINEAR", rep] = liblinear_predict(model, Bs)
            acc["LIBLINEAR", rep] = float(np.mean(pred["LIBLINEAR", rep] == yte))
            term["LIBLINEAR", rep] = _liblinear_termination(hit, it)
            if rep == "white":
                for m, lib in libs.items():
                    model, el, it, hit = liblinear_train(As, ytr, 64.0 / n, extra="-q",
                                                         seed=1, lib=lib)
                    a = float(np.mean(liblinear_predict(model, Bs) == yte))
                    paper = PAPER4.get((pair, m), ("-", "-", "-"))
                    rows4.append([f"{pair[0]} vs {pair[1]}", f"LIBLINEAR ({m})", _cell(paper[0]),
                                  f"{a:.4f}", _cell(paper[1], "{:.3f}"), f"{el:.3f}", paper[2],
                                  _liblinear_termination(hit, it)])
        paper = PAPER4.get((pair, "FISTA H-SVM"), ("-", "-", "-"))
        rows4.append([f"{pair[0]} vs {pair[1]}", "FISTA H-SVM", _cell(paper[0]),
                      f"{acc['FISTA H-SVM', 'white']:.4f}", _cell(paper[1], "{:.3f}"),
                      f"{secs['FISTA H-SVM', 'white']:.3f}", paper[2],
                      term["FISTA H-SVM", "white"]])
        for method in ("FISTA SVM", "FISTA H-SVM", "LIBLINEAR"):
            agree = float(np.mean(pred[method, "black"] == pred[method, "white"]))
            paper = PAPER3.get((pair, method), ("-", "-", "-"))
            rows3.append([f"{pair[0]} vs {pair[1]}", method, _cell(paper[0]),
                          f"{acc[method, 'black']:.4f}", _cell(paper[1]),
                          f"{acc[method, 'white']:.4f}", _cell(paper[2]), f"{agree:.4f}",
                          f"{term[method, 'black']}; {term[method, 'white']}"])
    return rows3, rows4


def _cell(v, fmt="{:.4f}"):
    return v if isinstance(v, str) else fmt.format(v)


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=None, help="first training images per pair")
    ap.add_argument("--test", type=int, default=None, help="first test images per pair")
    ap.add_argument("--limits", type=int, nargs="*", default=[5000, 10000],
                    help=f"LIBLINEAR iteration limits of Table 4 (its own: {LIBLINEAR_MAX_ITER})")
    args = ap.parse_args()
    rows3, rows4 = run(PAIRS, args.train, args.test, tuple(args.limits))
    print(markdown(HEADER3, rows3))
    print()
    print(markdown(HEADER4, rows4))


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
