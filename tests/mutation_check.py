"""Mutation check of the certificate and verify code: does weakening it make a test fail?

Usage (from the repository root; not part of the default test run)::

    python tests/mutation_check.py              # every mutant, the default fast subset
    python tests/mutation_check.py --list       # the mutants only
    python tests/mutation_check.py --only certificates.py:243,_certificate.py:300
    python tests/mutation_check.py --tests "tests/test_svm.py -k certif"

The mutation sites are found with ``ast`` in the code that decides whether a claim
holds, so the list follows the code as it changes:

* ``marginkit/certificates.py`` (everything),
* the methods of the ``*Certificate`` classes of ``marginkit/solvers/svm/_certificate.py``
  and ``marginkit/solvers/tikhonov/`` with their referee functions (and the thresholds of
  ``marginkit/solvers/svm/_thresholds.py``), ``marginkit/_referee.py``,
* ``referee`` and ``finish_fields`` of ``marginkit/_api.py`` (the run loop's re-check).

Operators (each mutant changes one site):

* ``cmp``: ``>`` <-> ``>=``, ``<`` <-> ``<=``;
* ``norm``: a division ``a / b`` -> ``a`` (dropping a normalization), ``normalize=True``
  -> ``False``;
* ``stored``: a recomputed measure (a name the method compares with a threshold,
  ``x = f(...)``, or what ``recompute`` returns) -> the certificate's own field of that
  name, or its ``value`` (trusting the certificate);
* ``round``: a rounding term dropped: ``a + small`` -> ``a``, ``a * (1 + small)`` -> ``a``
  (small: a constant below 1e-3, or a product with one, or a name saying rounding/slack);
* ``early``: ``return True`` (a holding ``Verdict``; ``(True, None)`` for the referee) at
  the start of a checking function, or a guard ``if ...: return <reject>`` removed;
* ``all``: ``np.all`` -> ``np.any``, ``and`` -> ``or``.

For each mutant the file is rewritten in a private copy of the repository (compiled
extensions included), and the test subset runs there (``pytest -x``); the mutant is
*killed* when a test fails, *survives* otherwise. Tests that already fail on the
unmutated code are left out of every run (they would kill everything). The report lists
the survivors with their source line.
"""
import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (file, which functions): None = every function of the file; "certificates" = the
#: methods of classes named *Certificate; a tuple = those top-level functions (and, with
#: "certificates" among them, those methods)
TARGETS = (
    ("marginkit/certificates.py", None),
    ("marginkit/solvers/svm/_certificate.py", ("certificates", "_referee_certified_points",
                                               "_referee_parts", "_scaled_frobenius2")),
    ("marginkit/solvers/svm/_thresholds.py", ("run_thresholds", "certify_level")),
    ("marginkit/solvers/tikhonov/_certificate.py", ("certificates", "run_targets")),
    ("marginkit/solvers/tikhonov/_decrement_bound.py", ("_decrement_referee",
                                                        "_direction_solver",
                                                        "_decrement_pass2")),
    ("marginkit/solvers/tikhonov/_losses.py", ("_loss_derivatives_bounded",)),
    ("marginkit/_referee.py", None),  # the referees' shared row blocks and rounding
    ("marginkit/_api.py", ("referee", "finish_fields")),
)

#: the fast subset: the checks of every claim kind, tampering, the statuses, the re-check
#: of third-party claims, and the certificate tests of each family
DEFAULT_TESTS = (
    "tests/test_hostile.py -k 'tamper or status or rule_claims or rule-claims'",
    "tests/test_perceptron.py -k 'certif or verify or infeasib or separ'",
    "tests/test_svm.py -k 'certif or verify or tamper'",
    "tests/test_tikhonov.py -k 'certif or verify or decrement'",
    "tests/test_reliability.py -k 'certificate or honest or duplicates'",
    "tests/test_dask.py -k 'certif or verify'",
    # the referees' own tests, where they exist
    "tests/test_referee.py",
    "tests/test_svm_trust.py",
    "tests/test_tikhonov_trust.py",
)
CHECKING = {"check", "_holds", "verify", "recompute", "margins", "referee"}


class Mutant:
    def __init__(self, path, func, op, line, start, end, new, note):
        self.path, self.func, self.op, self.line = path, func, op, line
        self.start, self.end, self.new, self.note = start, end, new, note

    def label(self):
        return f"{self.path}:{self.line} {self.func} [{self.op}] {self.note}"


def _offsets(src):
    """Offsets of the start of each line (1-based lines)."""
    out, pos = [0, 0], 0
    for line in src.splitlines(keepends=True):
        pos += len(line)
        out.append(pos)
    return out


def _span(node, lines):
    return (lines[node.lineno] + node.col_offset, lines[node.end_lineno] + node.end_col_offset)


def _small(node):
    """A rounding-size term: a constant below 1e-3 in magnitude, a product or quotient
    with one, or a name that says rounding / slack / tolerance."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return 0 < abs(node.value) < 1e-3
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
        return _small(node.left) or _small(node.right)
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return any(w in name.lower() for w in ("round", "slack", "gamma_n", "unit_roundoff"))
    if isinstance(node, ast.Call):
        return _small(node.func)
    return False


def _one_plus_small(node):
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
            and isinstance(node.left, ast.Constant) and node.left.value == 1
            and _small(node.right))


def _fields_of(cls):
    """Attribute names a class assigns on self (self.X = ...)."""
    out = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    out.add(t.attr)
    return out


def _abstract(fn):
    """A body that only raises (an abstract method): its mutants are equivalent."""
    body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def _functions(tree, which):
    """(qualified name, function node, class node or None) of the target functions
    (abstract methods left out)."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if which is None or (isinstance(which, tuple) and node.name in which):
                out.append((node.name, node, None))
        elif isinstance(node, ast.ClassDef):
            if which is None or (which == "certificates" or "certificates" in which) \
                    and node.name.endswith("Certificate"):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not _abstract(item):
                        out.append((f"{node.name}.{item.name}", item, node))
    return out


def _reject_return(node):
    """``return False`` / ``return Verdict.reject(...)`` / ``return False, None``..."""
    if not isinstance(node, ast.Return) or node.value is None:
        return False
    v = node.value
    if isinstance(v, ast.Constant) and v.value is False:
        return True
    if isinstance(v, ast.Tuple) and v.elts and isinstance(v.elts[0], ast.Constant) \
            and v.elts[0].value is False:
        return True
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "reject":
        return True
    return False


def mutants_of(path):
    full = os.path.join(ROOT, path)
    src = open(full, encoding="utf-8").read()
    tree = ast.parse(src)
    lines = _offsets(src)
    which = dict(TARGETS)[path]
    out = []

    def add(func, op, node, new, note):
        a, b = _span(node, lines)
        out.append(Mutant(path, func, op, node.lineno, a, b, new, note))

    for qual, fn, cls in _functions(tree, which):
        fields = _fields_of(cls) if cls is not None else set()
        short = fn.name
        # the recomputed measures: names compared with something (a threshold)
        order = (ast.Gt, ast.GtE, ast.Lt, ast.LtE)
        compared = {n.id for c in ast.walk(fn) if isinstance(c, ast.Compare)
                    and any(isinstance(o, order) for o in c.ops)
                    for side in [c.left, *c.comparators] for n in ast.walk(side)
                    if isinstance(n, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare):
                for i, op in enumerate(node.ops):
                    swap = {ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Lt: ast.LtE, ast.LtE: ast.Lt}
                    if type(op) in swap:
                        new_ops = list(node.ops)
                        new_ops[i] = swap[type(op)]()
                        m = ast.Compare(left=node.left, ops=new_ops, comparators=node.comparators)
                        add(qual, "cmp", node, ast.unparse(m),
                            f"{type(op).__name__} -> {swap[type(op)].__name__}")
            elif isinstance(node, ast.BinOp):
                if isinstance(node.op, ast.Div):
                    add(qual, "norm", node, f"({ast.unparse(node.left)})",
                        f"drop '/ {ast.unparse(node.right)}'")
                if isinstance(node.op, (ast.Add, ast.Sub)):
                    if _small(node.right):
                        add(qual, "round", node, f"({ast.unparse(node.left)})",
                            f"drop '{ast.unparse(node.right)}'")
                    elif isinstance(node.op, ast.Add) and _small(node.left):
                        add(qual, "round", node, f"({ast.unparse(node.right)})",
                            f"drop '{ast.unparse(node.left)}'")
                if isinstance(node.op, ast.Mult):
                    if _one_plus_small(node.right):
                        add(qual, "round", node, f"({ast.unparse(node.left)})",
                            f"drop '* {ast.unparse(node.right)}'")
                    elif _one_plus_small(node.left):
                        add(qual, "round", node, f"({ast.unparse(node.right)})",
                            f"drop '{ast.unparse(node.left)} *'")
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Attribute) and f.attr == "all" and \
                        isinstance(f.value, ast.Name) and f.value.id == "np":
                    add(qual, "all", f, "np.any", "np.all -> np.any")
                for kw in node.keywords:
                    if kw.arg == "normalize" and isinstance(kw.value, ast.Constant) \
                            and kw.value.value is True:
                        add(qual, "norm", kw.value, "False", "normalize=True -> False")
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
                add(qual, "all", node, "(" + " or ".join(ast.unparse(v) for v in node.values) + ")",
                    "and -> or")
            elif isinstance(node, ast.Assign) and cls is not None and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id in compared \
                    and any(isinstance(n, ast.Call) for n in ast.walk(node.value)):
                name = node.targets[0].id
                field = name if name in fields else "value"
                add(qual, "stored", node.value, f"self.{field}",
                    f"{name} = self.{field} (the certificate's own number)")
            elif isinstance(node, ast.Assign) and cls is not None and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Call):
                # x, y = f(...): the measures among x, y replaced right after
                for elt in node.targets[0].elts:
                    if isinstance(elt, ast.Name) and elt.id in compared:
                        field = elt.id if elt.id in fields else "value"
                        end = lines[node.end_lineno] + node.end_col_offset
                        indent = " " * node.col_offset
                        out.append(Mutant(path, qual, "stored", node.lineno, end, end,
                                          f"\n{indent}{elt.id} = self.{field}",
                                          f"{elt.id} = self.{field} (the certificate's own number)"))
            elif isinstance(node, ast.Return) and cls is not None and short == "recompute" \
                    and node.value is not None:
                add(qual, "stored", node.value, "self.value",
                    "return self.value (the certificate's own number)")
            elif isinstance(node, ast.If) and len(node.body) == 1 and _reject_return(node.body[0]):
                add(qual, "early", node, "pass", f"guard 'if {ast.unparse(node.test)}' removed")
        if short in CHECKING and fn.body:
            first = fn.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and len(fn.body) > 1:
                first = fn.body[1]  # after the docstring
            indent = " " * first.col_offset
            if short == "check":
                ret = "return Verdict(True, self.kind)"
            elif short == "referee":
                ret = "return True, None"
            elif short in ("_holds", "verify"):
                ret = "return True"
            else:
                ret = None
            if ret is not None:
                a = lines[first.lineno] + first.col_offset
                out.append(Mutant(path, qual, "early", first.lineno, a, a,
                                  f"{ret}\n{indent}", f"'{ret}' at the start"))
    return out


def all_mutants(only=None):
    """Every mutant, or those whose label contains one of the comma-separated ``only``."""
    pats = None if only is None else [p for p in only.split(",") if p]
    out = []
    for path, _ in TARGETS:
        if not os.path.exists(os.path.join(ROOT, path)):
            continue
        for m in mutants_of(path):
            if pats is None or any(p in m.label() for p in pats):
                out.append(m)
    return out


def apply(m, root):
    full = os.path.join(root, m.path)
    src = open(os.path.join(ROOT, m.path), encoding="utf-8").read()
    new = src[:m.start] + m.new + src[m.end:]
    compile(new, full, "exec")  # a mutant that does not even compile is a harness bug
    with open(full, "w", encoding="utf-8") as fh:
        fh.write(new)


def restore(m, root):
    shutil.copyfile(os.path.join(ROOT, m.path), os.path.join(root, m.path))


def private_copy():
    """The repository (sources, compiled extensions, tests, configuration) in a temp dir."""
    dst = tempfile.mkdtemp(prefix="mk-mutation-")

    def ignore(d, names):
        return [n for n in names if n in (".git", "build", "__pycache__", ".pytest_cache",
                                          "asv_bench", "docs", "benchmarks")]

    for name in ("marginkit", "tests"):
        shutil.copytree(os.path.join(ROOT, name), os.path.join(dst, name), ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "conftest.py"):
        if os.path.exists(os.path.join(ROOT, name)):
            shutil.copy(os.path.join(ROOT, name), dst)
    return dst


def _env(root):
    env = dict(os.environ)
    env["PYTHONPATH"] = root
    env.setdefault("MARGINKIT_DATA", "/work/shared/data")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def collect(root, specs):
    """Node ids of the test subset (a spec naming a file that does not exist is skipped)."""
    ids = []
    for spec in specs:
        if not os.path.exists(os.path.join(root, spec.split()[0])):
            continue
        proc = subprocess.run(f"{sys.executable} -m pytest -q -p no:cacheprovider --collect-only {spec}",
                              shell=True, cwd=root, env=_env(root), capture_output=True, text=True)
        ids += [ln.strip() for ln in proc.stdout.splitlines() if "::" in ln]
    return ids


def run_tests(root, ids, timeout, stop_first=True):
    """(passed?, failing ids, seconds)."""
    argfile = os.path.join(root, "ids.txt")
    with open(argfile, "w") as fh:
        fh.write("\n".join(ids))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf",
           "--no-header", f"@{argfile}"]
    if stop_first:
        cmd.insert(4, "-x")
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=root, env=_env(root), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, ["(timeout)"], time.monotonic() - t0
    failed = [ln.split(" ", 1)[1].split(" - ")[0] for ln in proc.stdout.splitlines()
              if ln.startswith(("FAILED ", "ERROR "))]
    return proc.returncode == 0, failed, time.monotonic() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--only", help="only mutants whose label contains one of these "
                    "comma-separated texts (e.g. '_certificate.py:300,_decrement_bound.py:120')")
    ap.add_argument("--tests", action="append", help="pytest arguments of the subset "
                    "(repeatable; default: the certificate subset)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant run")
    args = ap.parse_args(argv)
    mutants = all_mutants(args.only)
    if args.list:
        for m in mutants:
            print(m.label())
        print(f"{len(mutants)} mutants")
        return 0
    root = private_copy()
    try:
        specs = args.tests or list(DEFAULT_TESTS)
        ids = collect(root, specs)
        ok, failing, secs = run_tests(root, ids, args.timeout, stop_first=False)
        keep = [i for i in ids if i not in set(failing)]
        print(f"subset: {len(ids)} tests, {len(failing)} fail on the unmutated code "
              f"(left out), baseline {secs:.0f} s", flush=True)
        survivors = []
        for k, m in enumerate(mutants, 1):
            apply(m, root)
            try:
                passed, failed, secs = run_tests(root, keep, args.timeout)
            finally:
                restore(m, root)
            state = "SURVIVED" if passed else "killed"
            killer = "" if passed else f" by {failed[0] if failed else '(error)'}"
            print(f"[{k}/{len(mutants)}] {state:8s} {secs:5.0f}s {m.label()}{killer}", flush=True)
            if passed:
                survivors.append(m)
        print(f"\n{len(mutants) - len(survivors)} killed, {len(survivors)} survived")
        for m in survivors:
            src = open(os.path.join(ROOT, m.path), encoding="utf-8").read().splitlines()
            print(f"  SURVIVED {m.label()}\n      {src[m.line - 1].strip()}")
        return 1 if survivors else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
