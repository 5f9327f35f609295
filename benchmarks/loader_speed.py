"""``load_libsvm`` vs scikit-learn's ``load_svmlight_file`` on a large LIBSVM text file.

Writes (once, into ``--path``) a LIBSVM file of about ``--gigabytes`` GB from the url-like
two-cluster model (``make_clusters(like="url")``: millions of columns, ~116 nonzeros per
row, values printed with 9 significant digits), then reads it in fresh processes,
alternating the readers, ``--reps`` times each: marginkit float64, marginkit float32,
scikit-learn float64. Prints the median wall time and the peak RSS of each reader (the
child's maximum resident set minus that of a child that only imports the readers), the
size of the arrays returned, and the ratio to scikit-learn's time::

    python benchmarks/loader_speed.py [--gigabytes 1] [--reps 3] [--path /tmp/url_like.svm]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

_CHILD = r"""
import json, sys, time
import numpy as np
which, path = sys.argv[1], sys.argv[2]
if which == "sklearn":
    from sklearn.datasets import load_svmlight_file
    load = lambda: load_svmlight_file(path, dtype=np.float64)
else:
    import marginkit as mk
    dtype = np.float32 if which == "marginkit float32" else np.float64
    load = lambda: mk.datasets.load_libsvm(path, dtype=dtype)
t0 = time.perf_counter()
X, y = load()
el = time.perf_counter() - t0
out = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
print(json.dumps({"seconds": el, "output_mib": out / 2**20, "shape": list(X.shape),
                  "nnz": int(X.nnz)}))
"""


#: a child that imports both readers and reads nothing: the processes' baseline RSS
_IDLE = ("import json, marginkit, sklearn.datasets; "
         "print(json.dumps({'seconds': 0, 'output_mib': 0, 'shape': [0, 0], 'nnz': 0}))")


def _child(args):
    """Run a child; its JSON line and its peak RSS in MiB (``wait4``: this child's own)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{args[3]} failed with exit code {proc.returncode}")
    row = json.loads(out)
    row["peak_mib"] = usage.ru_maxrss / 1024.0
    return row


def write_file(path, gigabytes):
    import marginkit as mk

    rows_per_gb = 700_000  # about 1.4 KB per url-like row at 9 significant digits
    n = int(gigabytes * rows_per_gb)
    done = 0
    with open(path + ".part", "w") as fh:
        while done < n:
            m = min(100_000, n - done)
            X, y = mk.datasets.make_clusters(m, like="url", random_state=done)
            for i in range(m):
                lo, hi = X.indptr[i], X.indptr[i + 1]
                feats = " ".join(f"{c + 1}:{v:.9g}"
                                 for c, v in zip(X.indices[lo:hi], X.data[lo:hi]))
                fh.write(f"{int(y[i])} {feats}\n")
            done += m
    os.replace(path + ".part", path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gigabytes", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--path", default=os.path.join("/tmp", "marginkit_url_like.svm"))
    args = ap.parse_args(argv)
    if not os.path.exists(args.path):
        write_file(args.path, args.gigabytes)
    size = os.path.getsize(args.path) / 1e9
    readers = ["marginkit float64", "marginkit float32", "sklearn"]
    runs = {r: [] for r in readers}
    for _ in range(args.reps):
        for r in readers:
            runs[r].append(_child([sys.executable, "-c", _CHILD, r, args.path]))
    idle = _child([sys.executable, "-c", _IDLE])["peak_mib"]
    base = float(np.median([x["seconds"] for x in runs["sklearn"]]))
    print(f"file: {size:.2f} GB, shape {runs['sklearn'][0]['shape']}, "
          f"nnz {runs['sklearn'][0]['nnz']}")
    print("| reader | median s | / sklearn | peak RSS MiB | output MiB |")
    print("|---|---|---|---|---|")
    for r in readers:
        t = float(np.median([x["seconds"] for x in runs[r]]))
        peak = max(x["peak_mib"] for x in runs[r]) - idle
        print(f"| {r} | {t:.2f} | {t / base:.2f} | {peak:.0f} | {runs[r][0]['output_mib']:.0f} |")


if __name__ == "__main__":
    main()
