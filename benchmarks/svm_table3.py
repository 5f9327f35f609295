"""Paper 001, Table 3: MNIST digit pairs, original and inverted (1 - x) images.

    MARGINKIT_DATA=<data folder> python benchmarks/svm_table3.py

Data: the MNIST *test* images shipped in MARGINKIT_DATA/mnist (the training file is not
available), pixels / 255, pairs 3/5, 1/9, 2/7, one stratified 70/30 split per pair (seed 0)
used for both representations. As in the paper's section 5.2, FISTA's implicit centering is
off: fista and fista_svm get scale="scale" (division by the training standard deviation,
constant pixels dropped) and LIBLINEAR (-s 3 -B 1 -c 64/n) gets X Diag(sigma)^-1.
Agreement = fraction of test images given the same label by the classifiers trained on the
original and on the inverted images.
"""
import gzip
import os

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from svm_common import data_dir, liblinear_predict, liblinear_train, std_scaled, timed_solve


def read_idx(path):
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    folder = os.path.join(data_dir(), "mnist")
    images = read_idx(os.path.join(folder, "t10k-images-idx3-ubyte.gz")).reshape(10000, -1) / 255.0
    labels = read_idx(os.path.join(folder, "t10k-labels-idx1-ubyte.gz"))
    from sklearn.model_selection import train_test_split

    print("| digits | method | black acc. | white acc. | agreement | time black (s) | time white (s) | note |")
    print("|---|---|---|---|---|---|---|---|")
    for a, b in ((3, 5), (1, 9), (2, 7)):
        keep = (labels == a) | (labels == b)
        X = images[keep]
        y = np.where(labels[keep] == a, 1.0, -1.0)
        idx_tr, idx_te = train_test_split(np.arange(y.size), test_size=0.3, stratify=y, random_state=0)
        preds, accs, times, notes = {}, {}, {}, {}
        for rep_name, Xr in (("black", X), ("white", 1.0 - X)):
            Xtr, Xte, ytr, yte = Xr[idx_tr], Xr[idx_te], y[idx_tr], y[idx_te]
            for method, kw in (("FISTA SVM", dict(solver="fista_svm", scale="scale")),
                               ("FISTA H-SVM", dict(solver="fista", scale="scale"))):
                res, el = timed_solve(Xtr, ytr, **kw)
                preds[(method, rep_name)] = res.predict(Xte)
                accs[(method, rep_name)] = res.score(Xte, yte)
                times[(method, rep_name)] = el
                notes.setdefault(method, []).append(f"{res.status} {res.n_iter} it.")
            Xs, Xts = std_scaled(sp.csr_matrix(Xtr), sp.csr_matrix(Xte))
            model, el, it, hit = liblinear_train(Xs, ytr, 64.0 / ytr.size)
            preds[("LIBLINEAR", rep_name)] = liblinear_predict(model, Xts)
            accs[("LIBLINEAR", rep_name)] = float((preds[("LIBLINEAR", rep_name)] == yte).mean())
            times[("LIBLINEAR", rep_name)] = el
            notes.setdefault("LIBLINEAR", []).append(f"{it} it.{' (limit)' if hit else ''}")
        for method in ("FISTA SVM", "FISTA H-SVM", "LIBLINEAR"):
            agree = float((preds[(method, "black")] == preds[(method, "white")]).mean())
            print(f"| {a} vs {b} | {method} | {accs[(method, 'black')]:.4f} | "
                  f"{accs[(method, 'white')]:.4f} | {agree:.4f} | {times[(method, 'black')]:.3f} | "
                  f"{times[(method, 'white')]:.3f} | {'; '.join(notes[method])} |", flush=True)


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
