"""Paper 001, Table 5: premature stops of LIBLINEAR's rule on the four-point data set.

    python benchmarks/svm_table5.py [--seeds 1000]

For d in {500, 1100, 2000, 5000} and seeds 1..N: dcd with the ``liblinear`` rule
(tol 0.1, LIBLINEAR's shrinking, random order per epoch from the seed), counted as a
failure when it stops (status "converged") with c_1 misclassified; dcd with the
``certified_points`` rule on the same orderings; fista with its certified stop (one run,
deterministic). Also one run of liblinear-official (-s 3 -B 1 -c 64/n, no scaling), whose
orderings come from its own C rand() and cannot be seeded from Python.
"""
import argparse

import numpy as np

import marginkit as mk
from svm_common import liblinear_predict, liblinear_train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=1000)
    args = ap.parse_args()
    print("| d | dcd + liblinear rule: failure rate (%) | median epochs | dcd + certified_points: "
          "c_1 misclassified | fista (certified) accuracy (%) | fista iterations | "
          "liblinear-official: c_1 correct, iterations |")
    print("|---|---|---|---|---|---|---|")
    for d in (500, 1100, 2000, 5000):
        X, y = mk.datasets.make_four_point(d, sparse=True)
        fail = cert_fail = 0
        epochs = []
        for s in range(1, args.seeds + 1):
            lib = mk.solve(X, y, solver="dcd", scale=None, stop="liblinear", random_state=s)
            epochs.append(lib.n_iter)
            if lib.status == "converged" and lib.decision_function(X[:1])[0] <= 0:
                fail += 1
            cert = mk.solve(X, y, solver="dcd", scale=None, random_state=s)
            if cert.status != "certified" or cert.decision_function(X[:1])[0] <= 0:
                cert_fail += 1
        fista = mk.solve(X, y, solver="fista", scale=None)
        model, _, it, _ = liblinear_train(X, y.astype(float), 64.0 / 4)
        c1_ok = liblinear_predict(model, X[:1])[0] == 1
        print(f"| {d} | {100.0 * fail / args.seeds:.1f} | {np.median(epochs):.0f} | {cert_fail} | "
              f"{100.0 * fista.score(X, y):.0f} | {fista.n_iter} | {c1_ok}, {it} |", flush=True)


if __name__ == "__main__":
    main()
