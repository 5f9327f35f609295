"""Speed claims of the SVM family (arXiv:2512.03947), measured side by side in one process.

    MARGINKIT_DATA=<data folder> python benchmarks/svm_speed.py [--reps 7]

1. One FISTA iteration vs two scipy CSR matvecs (X @ v and X.T @ u) on the same CSR data:
   per-iteration time = (t(K iterations) - t(0 iterations)) / K of mk.solve (so the Python
   between iterations counts), interleaved with K pairs of matvecs; medians over reps.
2. dcd with the certified stop vs LIBLINEAR (-s 3 -B 1 -c 64/n, std-scaled data) on a9a,
   mushrooms, madelon, splice, svmguide1: median wall times, ratio, test accuracies,
   LIBLINEAR's iteration count (and whether it hit its iteration limit). dcd is run with
   implicit centering + scaling (scale="std") and on LIBLINEAR's own input (scale="scale").
3. fista vs LIBLINEAR on a9a (ratio of medians).
BLAS is limited to one thread (threadpoolctl) so that every contender is single-threaded.
"""
import argparse
import time

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from svm_common import (liblinear_predict, liblinear_train, load_split, median, std_scaled,
                        timed_solve)
import marginkit as mk


def fista_iteration_ratio(name, reps, K=100):
    Xtr, ytr, _, _ = load_split(name)
    X = sp.csr_matrix(Xtr)
    n, d = X.shape
    rng = np.random.default_rng(0)
    v, u = rng.standard_normal(d), rng.standard_normal(n)
    it_t, mv_t = [], []
    for _ in range(reps):
        _, t0 = timed_solve(X, ytr, solver="fista", stop=("max_iter", {"n": 1}))
        _, tK = timed_solve(X, ytr, solver="fista", stop=("max_iter", {"n": K + 1}))
        it_t.append((tK - t0) / K)
        t = time.perf_counter()
        for _ in range(K):
            X @ v
            X.T @ u
        mv_t.append((time.perf_counter() - t) / K)
    a, b = median(it_t), median(mv_t)
    return f"| {name} | {n} | {d} | {X.nnz} | {a * 1e3:.3f} | {b * 1e3:.3f} | {a / b:.2f} |"


def dcd_vs_liblinear(name, reps):
    Xtr, ytr, Xte, yte = load_split(name)
    n = Xtr.shape[0]
    Xs, Xts = std_scaled(Xtr, Xte)
    t_lib, t_std, t_sc, t_fista = [], [], [], []
    for rep in range(reps):
        model, el, it, hit = liblinear_train(Xs, ytr, 64.0 / n)
        t_lib.append(el)
        r_std, el = timed_solve(Xtr, ytr, solver="dcd", random_state=rep)
        t_std.append(el)
        r_sc, el = timed_solve(Xtr, ytr, solver="dcd", scale="scale", random_state=rep)
        t_sc.append(el)
        if name == "a9a":
            r_f, el = timed_solve(Xtr, ytr, solver="fista")
            t_fista.append(el)
    acc_lib = float((liblinear_predict(model, Xts) == yte).mean())
    lib = median(t_lib)
    row = (f"| {name} | {acc_lib:.4f} | {lib:.3f} | {it}{' (max)' if hit else ''} | "
           f"{r_std.score(Xte, yte):.4f} | {median(t_std):.3f} | {median(t_std) / lib:.2f} | "
           f"{r_std.n_iter} | {r_sc.score(Xte, yte):.4f} | {median(t_sc):.3f} | "
           f"{median(t_sc) / lib:.2f} | {r_sc.n_iter} |")
    extra = None
    if t_fista:
        extra = (f"fista on a9a: acc {r_f.score(Xte, yte):.4f}, {median(t_fista):.3f} s, "
                 f"{r_f.n_iter} iterations; LIBLINEAR {lib:.3f} s; ratio {median(t_fista) / lib:.2f}")
    return row, extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    Xw, yw, _, _ = load_split("heart")
    for s in ("fista", "dcd"):
        mk.solve(Xw, yw, solver=s)
    print("### One FISTA iteration vs two scipy CSR matvecs\n")
    print("| dataset | n | d | nnz | fista iteration (ms) | X@v + X.T@u (ms) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in ("a9a", "mushrooms", "madelon", "splice", "svmguide1"):
        print(fista_iteration_ratio(name, args.reps), flush=True)
    print("\n### dcd (certified stop) vs LIBLINEAR\n")
    print("| dataset | LIBLINEAR acc | time (s) | iters | dcd std acc | time | ratio | epochs "
          "| dcd scale-only acc | time | ratio | epochs |")
    print("|---" * 12 + "|")
    extras = []
    for name in ("a9a", "mushrooms", "madelon", "splice", "svmguide1"):
        row, extra = dcd_vs_liblinear(name, args.reps)
        print(row, flush=True)
        if extra:
            extras.append(extra)
    print()
    for e in extras:
        print(e)


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
