"""``load_libsvm`` vs scikit-learn's ``load_svmlight_file`` on a large LIBSVM text file.

Writes (once, into ``--path``) a LIBSVM file of about ``--gigabytes`` GB from the url-like
two-cluster model (``make_clusters(like="url")``: millions of columns, ~116 nonzeros per
row, values printed with 9 significant digits), then reads it in fresh processes,
alternating the readers, ``--reps`` times each: marginkit float64, marginkit float32,
scikit-learn float64. Prints the median wall time and the peak RSS of each reader (the
process's maximum resident set minus its size before reading), and the ratio to
scikit-learn's time::

    python benchmarks/loader_speed.py [--gigabytes 1] [--reps 3] [--path /tmp/url_like.svm]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

_CHILD = r"""
import json, resource, sys, time
import numpy as np
which, path = sys.argv[1], sys.argv[2]
if which == "sklearn":
    from sklearn.datasets import load_svmlight_file
    load = lambda: load_svmlight_file(path, dtype=np.float64)
else:
    import marginkit as mk
    dtype = np.float32 if which == "marginkit float32" else np.float64
    load = lambda: mk.datasets.load_libsvm(path, dtype=dtype)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
X, y = load()
el = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
print(json.dumps({"seconds": el, "peak_mib": (peak - before) / 1024.0,
                  "output_mib": out / 2**20, "shape": list(X.shape), "nnz": int(X.nnz)}))
"""


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
            out = subprocess.run([sys.executable, "-c", _CHILD, r, args.path], check=True,
                                 capture_output=True, text=True)
            runs[r].append(json.loads(out.stdout))
    base = float(np.median([x["seconds"] for x in runs["sklearn"]]))
    print(f"file: {size:.2f} GB, shape {runs['sklearn'][0]['shape']}, "
          f"nnz {runs['sklearn'][0]['nnz']}")
    print("| reader | median s | / sklearn | peak RSS MiB | output MiB |")
    print("|---|---|---|---|---|")
    for r in readers:
        t = float(np.median([x["seconds"] for x in runs[r]]))
        peak = max(x["peak_mib"] for x in runs[r])
        print(f"| {r} | {t:.2f} | {t / base:.2f} | {peak:.0f} | {runs[r][0]['output_mib']:.0f} |")


if __name__ == "__main__":
    main()
