"""Paper 001, Table 1: test accuracy and time of fista, fista_svm, dcd, pegasos and
LIBLINEAR (-s 3 -B 1 -c 64/n on std-scaled data), measured side by side in one process.

    MARGINKIT_DATA=<data folder> python benchmarks/svm_table1.py [--reps 5] [--datasets a9a,...]

Times are medians over ``--reps`` runs (mk.solve wall time, including validation, the
scaling statistics and the power iteration; LIBLINEAR: ``train`` only). Prints a
markdown table.
"""
import argparse

from threadpoolctl import threadpool_limits

from svm_common import (FILES, liblinear_predict, liblinear_train, load_split, median,
                        std_scaled, timed_solve)

METHODS = [
    ("FISTA H-SVM", dict(solver="fista")),
    ("FISTA SVM", dict(solver="fista_svm")),
    ("DCD certified", dict(solver="dcd", random_state=0)),
    ("DCD liblinear rule", dict(solver="dcd", scale="scale", stop="liblinear", random_state=0)),
    ("Pegasos (200 ep.)", dict(solver="pegasos", scale="scale", epochs=200, random_state=0)),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasets", default=",".join(FILES))
    ap.add_argument("--no-pegasos", action="store_true")
    args = ap.parse_args()
    warm_X, warm_y, _, _ = load_split("heart")
    for _, kw in METHODS:  # first calls pay for imports and entry-point loading
        timed_solve(warm_X, warm_y, **{**kw, "epochs": 1} if kw["solver"] == "pegasos" else kw)
    print("| dataset | n_tr | n_te | d | " + " | ".join(f"{m} acc | time" for m, _ in METHODS)
          + " | LIBLINEAR acc | time | iters |")
    print("|---" * (4 + 2 * len(METHODS) + 3) + "|")
    for name in args.datasets.split(","):
        Xtr, ytr, Xte, yte = load_split(name)
        n = Xtr.shape[0]
        Xs, Xts = std_scaled(Xtr, Xte)
        cells = []
        for label, kw in METHODS:
            if args.no_pegasos and kw["solver"] == "pegasos":
                cells.append("- | -")
                continue
            times, res = [], None
            reps = 1 if kw["solver"] == "pegasos" else args.reps
            for _ in range(reps):
                res, el = timed_solve(Xtr, ytr, **kw)
                times.append(el)
            cells.append(f"{res.score(Xte, yte):.4f} | {median(times):.3f}"
                         + ("" if res.status in ("certified", "converged") or kw["solver"] == "pegasos"
                            else f" ({res.status})"))
        times = []
        for _ in range(args.reps):
            model, el, it, hit = liblinear_train(Xs, ytr, 64.0 / n)
            times.append(el)
        acc = float((liblinear_predict(model, Xts) == yte).mean())
        cells.append(f"{acc:.4f} | {median(times):.3f} | {it}{' (max)' if hit else ''}")
        print(f"| {name} | {n} | {Xte.shape[0]} | {Xtr.shape[1]} | " + " | ".join(cells) + " |",
              flush=True)


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
