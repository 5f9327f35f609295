"""Phase profile of ``dcd`` on an exact RBF kernel: wall time per phase of one solve.

Usage (from the repository root, ``MARGINKIT_DATA`` set)::

    PYTHONPATH=. python benchmarks/kernel_dcd_phases.py [--data a9a10k] [--gamma 0.05]
        [--C 1] [--threads 1] [--rows float32]

Each phase is the inclusive wall time of the functions that make it (timed by wrapping
them for this run only; nested phases are indented and included in their parent): the
Gram row fills (kernel blocks and the store into the held matrix or the row cache, with
the first touch of fresh pages), the kernel's row blocks and their products, the moves
(``dcd_pairs``), the shrinking bookkeeping, the solver's fresh float64 bound, and the
referee's check with its careful blocks. ``--rows`` sets the dtype of the rows DCD
stores (float32 by default; float64 for comparison). Prints the status, the test
accuracy, the counters of ``res.extra`` and one line per phase.
"""
import argparse
import collections
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kernel_svm  # noqa: E402  (the data sets of the kernel benchmark)

import marginkit as mk  # noqa: E402
from marginkit.kernels import builtin  # noqa: E402
from marginkit.solvers.svm import _kernel, _kernel_certificate, _kernel_fast  # noqa: E402

PHASES = [
    (_kernel._KernelDCDState, "step", "passes (moves and row fills)"),
    (_kernel._Gram, "bring", "  row fills: selection, kernel blocks, store"),
    (_kernel._Gram, "ensure", "    store into the held matrix (incl. blocks)"),
    (_kernel._Gram, "block", "kernel row blocks (all callers)"),
    (builtin.RBFKernel, "rows", "  RBF rows (products, exponent, exp)"),
    (builtin, "_dot_block", "    row products (all callers)"),
    (_kernel_fast, "dcd_pairs", "moves (dcd_pairs)"),
    (_kernel_fast, "active_violations", "violations"),
    (_kernel_fast, "shrink_mask", "shrinking"),
    (_kernel._KernelDCDState, "_fresh", "fresh float64 bound"),
    (_kernel_certificate.KernelCertifiedPointsCertificate, "check", "referee"),
    (builtin.RBFKernel, "careful_block", "  referee's careful blocks"),
    (builtin.RBFKernel, "careful_products", "  referee's careful products"),
]


def instrument():
    times, calls = collections.defaultdict(float), collections.Counter()
    for owner, name, label in PHASES:
        f = getattr(owner, name)

        def timed(*a, _f=f, _label=label, **k):
            t = time.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                times[_label] += time.perf_counter() - t
                calls[_label] += 1

        setattr(owner, name, timed)
    return times, calls


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a10k")
    p.add_argument("--gamma", type=float, default=0.05)
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1, help="0: the default thread count")
    p.add_argument("--rows", default="float32", choices=["float32", "float64"])
    args = p.parse_args(argv)
    from threadpoolctl import threadpool_limits

    X, y, Xt, yt, _ = kernel_svm.load(args.data)
    _kernel.DCD_ROWS = np.dtype(args.rows)
    times, calls = instrument()
    t0 = time.perf_counter()
    with threadpool_limits(args.threads or None):
        res = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": args.gamma},
                       C=args.C)
    total = time.perf_counter() - t0
    acc = 100.0 * float(np.mean(res.predict(Xt) == yt))
    keys = ("gram", "gram_rows", "moves", "full_passes", "kernel_rows", "unshrinks")
    print(f"{args.data}: status {res.status}, {res.n_iter} passes, {total:.2f} s, test "
          f"accuracy {acc:.2f}%, " + ", ".join(f"{k} {res.extra.get(k)}" for k in keys))
    for _, _, label in PHASES:
        if calls[label]:
            print(f"{times[label]:8.2f} s  {calls[label]:6d} calls  {label}")


if __name__ == "__main__":
    main()
