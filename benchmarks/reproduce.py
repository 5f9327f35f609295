"""Run every reproduction of the papers' tables and write them beside the papers' numbers.

    MARGINKIT_DATA=<data folder> python benchmarks/reproduce.py --full     # as the papers
    MARGINKIT_DATA=<data folder> python benchmarks/reproduce.py --quick    # minutes
    MARGINKIT_DATA=<data folder> python benchmarks/reproduce.py --smoke    # seconds, a test

Tables (arXiv:2512.03947: SVM Tables 1, 3, 4, 5; Beugnot et al. 2021: Table 1):

* ``svm-table1``: a9a (the one data set of the paper's Table 1 in the data folder), FISTA
  SVM, FISTA H-SVM, LIBLINEAR, LIBSVM (``--full`` only), Pegasos (``svm_table1.measure``);
* ``svm-table3``, ``svm-table4``: MNIST pairs, original and inverted, LIBLINEAR with its
  iteration limit raised by recompiling it (``svm_table3.run``);
* ``svm-table5``: the four-point data set, liblinear-official seeded with ``srand(s)``
  for s = 1..1000 (``svm_table5.run``);
* ``tikhonov-table1``: learning-rate exponents of iterated Tikhonov with bootstrap
  standard errors (``tikhonov_rates.compute``; with ``--full`` also the JSON and the plot
  in ``docs/tikhonov_rates.{json,png}``).

The tables replace the blocks between ``.. begin generated <name>`` and ``.. end generated
<name>`` of the output page: ``docs/reproductions.rst`` with ``--full``, otherwise a copy
of it in ``reproductions-<mode>.rst`` of the current directory (so that a quick run does not
overwrite the documented full run); ``--out`` chooses the file. ``--only`` runs some of
the tables. Each block records the mode, the sizes, the commit and the wall time.
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (HERE, ROOT):  # the scripts' helpers, and marginkit from the checkout
    if path not in sys.path:
        sys.path.insert(0, path)

TABLES = ("svm-table1", "svm-table3", "svm-table4", "svm-table5", "tikhonov-table1")

#: sizes of each mode
MODES = {
    "smoke": {"table1_data": "heart", "table1_reps": 1, "libsvm": False,
              "mnist_train": 150, "mnist_test": 150, "mnist_max_iter": 100, "limits": (300,),
              "pairs": ((3, 5),), "four_point_d": (500, 1100), "seeds": 20,
              "rates_n": (40, 80), "rates_reps": 2, "rates_lambdas": 4, "rates_exact": 80,
              "rates_centres": 40, "jobs": 1},
    "quick": {"table1_data": "a9a", "table1_reps": 1, "libsvm": False,
              "mnist_train": 2000, "mnist_test": 1000, "mnist_max_iter": 10_000,
              "limits": (5000, 10000), "pairs": ((3, 5), (1, 9), (2, 7)),
              "four_point_d": (500, 1100, 2000, 5000), "seeds": 1000,
              "rates_n": (100, 200, 400, 800, 1600), "rates_reps": 10, "rates_lambdas": 50,
              "rates_exact": 200, "rates_centres": 100, "jobs": None},
    "full": {"table1_data": "a9a", "table1_reps": 3, "libsvm": True,
             "mnist_train": None, "mnist_test": None, "mnist_max_iter": 10_000,
             "limits": (5000, 10000), "pairs": ((3, 5), (1, 9), (2, 7)),
             "four_point_d": (500, 1100, 2000, 5000), "seeds": 1000,
             "rates_n": (100, 200, 400, 800, 1600, 3200, 6400), "rates_reps": 60,
             "rates_lambdas": 50, "rates_exact": 200, "rates_centres": 100, "jobs": None},
}


def rst_table(header, rows, title=None):
    """A ``list-table`` directive (cells escaped for reStructuredText)."""
    def esc(cell):
        cell = str(cell)
        for ch in "\\*`|":
            cell = cell.replace(ch, "\\" + ch)
        return re.sub(r"_(?=\s|$)", r"\\_", cell) or "\\ "

    lines = [f".. list-table::{(' ' + title) if title else ''}", "   :header-rows: 1", ""]
    for row in [header] + list(rows):
        lines.append(f"   * - {esc(row[0])}")
        lines += [f"     - {esc(c)}" for c in row[1:]]
    return "\n".join(lines)


def svm_table1(size):
    import svm_table1 as t1
    from svm_common import load_split

    name = size["table1_data"]
    got = t1.measure(name, reps=size["table1_reps"], libsvm=size["libsvm"])
    paper = t1.PAPER_A9A if name == "a9a" else {}
    rows = []
    for method in ("FISTA SVM", "FISTA H-SVM", "LIBLINEAR", "LIBSVM", "Pegasos (200 ep.)"):
        pa, pt = ((f"{paper[method][0]:.4f}", f"{paper[method][1]:.3f}") if method in paper
                  else ("-", "-"))
        if method in got:
            acc, sec, note = got[method]
            rows.append([method, pa, f"{acc:.4f}", pt, f"{sec:.3f}", note])
        else:
            rows.append([method, pa, "not run", pt, "-", "--full only"])
    Xtr, _, Xte, _ = load_split(name)
    header = [f"{name} ({Xtr.shape[0]} / {Xte.shape[0]} / {Xtr.shape[1]})",
              "test acc. (paper)", "test acc. (ours)", "time (s) (paper)",
              "time (s) (ours)", "ours: status"]
    return {"svm-table1": (header, rows, f"{size['table1_reps']} repetition(s), medians")}


def svm_tables3_4(size):
    import svm_table3 as t3

    rows3, rows4 = t3.run(size["pairs"], size["mnist_train"], size["mnist_test"],
                          size["limits"], max_iter=size["mnist_max_iter"])
    what = (f"training images per pair: {size['mnist_train'] or 'all'}, test images: "
            f"{size['mnist_test'] or 'all'}, FISTA maxit {size['mnist_max_iter']}")
    return {"svm-table3": (t3.HEADER3, rows3, what),
            "svm-table4": (t3.HEADER4, rows4, what + ", LIBLINEAR limits "
                           + ", ".join(map(str, size["limits"])))}


def svm_table5(size):
    import svm_table5 as t5

    rows = t5.run(size["four_point_d"], size["seeds"])
    return {"svm-table5": (t5.HEADER, rows, f"seeds 1..{size['seeds']}")}


def tikhonov_table1(size, mode, log):
    import tikhonov_rates as tr

    jobs = size["jobs"] or (os.cpu_count() or 1)
    ns = size["rates_n"]
    records, table, wall = tr.compute(ns, size["rates_reps"], size["rates_exact"],
                                      size["rates_centres"], 1e-6, "series", False, jobs,
                                      size["rates_lambdas"], log=log)
    if mode == "full":
        out = os.path.join(ROOT, "docs", "tikhonov_rates")
        tr.write(records, table, ns, {"n": list(ns), "reps": size["rates_reps"],
                                      "normalization": "series"}, wall, out)
    paper = {(0.25, 1): 0.71, (0.25, 3): 0.75, (0.25, 8): 0.79, (3.25, 1): 0.73,
             (3.25, 3): 0.83, (3.25, 8): 0.95, (10.25, 1): 0.72, (10.25, 3): 0.87,
             (10.25, 8): 0.98}
    rows = []
    for r in tr.RS:
        for t in tr.TS:
            row = table[f"{r}/{t}"]
            rows.append([f"{r:g}", str(t), f"{row['theory']:.2f}", f"{paper[r, t]:.2f}",
                         f"{row['gamma']:.2f} +- {row['gamma_se']:.2f}",
                         f"{row['gamma_mean_curve']:.2f}"])
    header = ["r", "t", "theory", "paper", "ours: gamma +- s.e.", "ours: one lambda per n"]
    what = (f"n = {', '.join(map(str, ns))}; {size['rates_reps']} repetitions; "
            f"{size['rates_lambdas']} lambdas; exact kernel up to n = {size['rates_exact']}, "
            f"Nystroem with {size['rates_centres']} centres above")
    return {"tikhonov-table1": (header, rows, what)}


def _commit():
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, check=True, capture_output=True, text=True).stdout
        return out + (" (with uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fill(page, name, block):
    """Replace the generated block ``name`` of the page's text."""
    begin, end = f".. begin generated {name}", f".. end generated {name}"
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(page):
        raise ValueError(f"the page has no block {begin!r} ... {end!r}")
    return pattern.sub(lambda _: f"{begin}\n\n{block}\n\n{end}", page)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    for m in MODES:
        mode.add_argument(f"--{m}", dest="mode", action="store_const", const=m)
    ap.add_argument("--only", nargs="+", choices=TABLES, default=list(TABLES))
    ap.add_argument("--out", default=None, help="page to write (see above)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    a = ap.parse_args(argv)
    size = MODES[a.mode]
    src = os.path.join(ROOT, "docs", "reproductions.rst")
    out = a.out or (src if a.mode == "full" else os.path.abspath(f"reproductions-{a.mode}.rst"))
    with open(out if os.path.exists(out) else src) as fh:
        page = fh.read()

    def log(msg):
        if not a.quiet:
            print(msg, flush=True)

    from threadpoolctl import threadpool_limits

    commit = _commit()
    steps = [("svm-table5", lambda: svm_table5(size)),
             ("tikhonov-table1", lambda: tikhonov_table1(size, a.mode, log)),
             ("svm-table1", lambda: svm_table1(size)),
             ("svm-table3", lambda: svm_tables3_4(size))]
    wanted = set(a.only)
    if "svm-table4" in wanted:
        wanted.add("svm-table3")
    for key, step in steps:
        if key not in wanted:
            continue
        log(f"{key} ({a.mode}) ...")
        t0 = time.perf_counter()
        with threadpool_limits(1):
            tables = step()
        wall = time.perf_counter() - t0
        for name, (header, rows, what) in tables.items():
            if name not in a.only:
                continue
            stamp = (f"``reproduce.py --{a.mode}``, commit {commit}: {what}; "
                     f"{wall:.0f} s of wall time (shared 2-core machine).")
            page = fill(page, name, rst_table(header, rows) + "\n\n" + stamp)
            log(rst_table(header, rows))
        with open(out, "w") as fh:  # after each step: a long run keeps what it has done
            fh.write(page)
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
