"""Iterated Tikhonov's ends over random problems: a scan for runs that spin, stall early, or
stop converging from one commit to another.

    python benchmarks/tikhonov_scan.py OUT.json [--seconds S] [--compare OLD.json]

Draws problems from a fixed master seed (so two commits draw the same ones, in the same
order, for as long as each runs): squared or logistic loss, n from 1,000 to 40,000 rows,
p from 5 to 100 columns, ``newton_solver`` "cg" or "cholesky", an intercept or not,
t = 1 or 3, offsets of X and y, scales of y from 1e-3 to 1e4, noise, lam the default or
1e-6/1e-8, sample weights on 30% of the problems. Each is solved with the defaults
otherwise (``tol=None``), and its status, Newton iterations and ``extra["failure"]`` are
written to OUT.json, keyed by the problem. Prints the status counts and the runs that
ended ``max_iter`` without a reason (spins). With ``--compare``, the problems both files
hold: those whose status or iterations differ, and the count of each change (for example
``converged -> max_iter``).
"""
import argparse
import collections
import json
import time
import warnings

import numpy as np

import marginkit as mk


def _problems(master):
    while True:
        cfg = dict(loss=str(master.choice(["squared", "logistic"])),
                   n=int(master.choice([1000, 3000, 10000, 20000, 40000],
                                       p=[.3, .25, .2, .15, .1])),
                   p=int(master.choice([5, 20, 40, 100])),
                   ns=str(master.choice(["cg", "cholesky"])),
                   fi=bool(master.integers(2)), t=int(master.choice([1, 3])),
                   xoff=float(master.choice([0, 0, 2.0, 100.0])),
                   yoff=float(master.choice([0, 0, 1e2, 1e4])),
                   ysc=float(master.choice([1e-3, 1, 1, 1e2, 1e4])),
                   noise=float(master.choice([0.01, 0.3, 3.0, 1e3])),
                   lam=master.choice([None, None, 1e-6, 1e-8]), sw=bool(master.random() < 0.3),
                   seed=int(master.integers(1e6)))
        if cfg["n"] * cfg["p"] >= 40000 * 100 and master.random() < 0.5:
            cfg["p"] = 40
        cfg["lam"] = None if cfg["lam"] is None else float(cfg["lam"])
        yield cfg


def _solve(cfg):
    rng = np.random.default_rng(cfg["seed"])
    n, p = cfg["n"], cfg["p"]
    X = rng.standard_normal((n, p))
    beta = rng.standard_normal(p)
    e = rng.standard_normal(n)
    s = X @ beta / np.sqrt(p)
    if cfg["loss"] == "squared":
        y = cfg["yoff"] + cfg["ysc"] * (s + cfg["noise"] * e)
    else:
        y = np.where(s + min(cfg["noise"], 10) * e > 0, 1.0, -1.0)
    X = X + cfg["xoff"]
    sw = rng.uniform(0.1, 3, n) if cfg["sw"] else None
    r = mk.solve(X, y, solver="iterated_tikhonov", loss=cfg["loss"], lam=cfg["lam"],
                 fit_intercept=cfg["fi"], newton_solver=cfg["ns"], t=cfg["t"],
                 sample_weight=sw, random_state=0)
    return dict(status=r.status, n_iter=int(r.n_iter), fail=str(r.extra.get("failure") or ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=480.0)
    ap.add_argument("--compare", help="a file this script wrote on another commit")
    args = ap.parse_args(argv)
    out, start = {}, time.time()
    warnings.simplefilter("ignore")
    for cfg in _problems(np.random.default_rng(12345)):
        if time.time() - start >= args.seconds:
            break
        out[json.dumps(cfg)] = _solve(cfg)
    with open(args.out, "w") as fh:
        json.dump(out, fh)
    print(len(out), "problems:", dict(collections.Counter(r["status"] for r in out.values())))
    spins = [k for k, r in out.items() if r["status"] == "max_iter" and not r["fail"]]
    print("max_iter without a reason:", len(spins))
    for k in spins[:10]:
        print("  ", k, out[k]["n_iter"])
    if args.compare:
        with open(args.compare) as fh:
            old = json.load(fh)
        common = [k for k in out if k in old]
        changes = collections.Counter()
        for k in common:
            a, b = old[k], out[k]
            if (a["status"], a["n_iter"]) != (b["status"], b["n_iter"]):
                changes[f"{a['status']} -> {b['status']}"] += 1
                print(f"  {k}\n    old {a['status']} {a['n_iter']} {a['fail'][:100]}"
                      f"\n    new {b['status']} {b['n_iter']} {b['fail'][:100]}")
        print(len(common), "in common; changes:", dict(changes))


if __name__ == "__main__":
    main()
