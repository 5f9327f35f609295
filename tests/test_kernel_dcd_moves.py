"""``_kernel_fast.dcd_pairs`` (the moves of kernel ``dcd``) against a plain-Python
statement of its rule: the same moves, r and G bit for bit, on boxes with empty and full
coordinates, a working subset (shrinking), rows read through a cache's slots, float32 and
float64 rows; and its refusals of arrays that do not fit."""
import numpy as np
import pytest

from marginkit.solvers.svm import _kernel_fast as kf


def _pg(g, r, gam):
    if gam <= 0.0:
        return 0.0
    if r <= 0.0:
        return g if g < 0.0 else 0.0
    if r >= gam:
        return g if g > 0.0 else 0.0
    return g


def _up(y, r, gam):
    return gam > 0.0 and ((y > 0.0 and r < gam) or (y < 0.0 and r > 0.0))


def _low(y, r, gam):
    return gam > 0.0 and ((y < 0.0 and r < gam) or (y > 0.0 and r > 0.0))


def _clip(v, hi):
    return 0.0 if v < 0.0 else (hi if v > hi else v)


def _reference(ws, K, r, G, y, gamma, qd, kd, mu, max_moves, read=None):
    """The rule of ``dcd_pairs``' docstring, one coordinate at a time (Python floats: the
    same float64 operations in the same order). K[c] is row c (float32 or float64).
    ``read`` (a set): the coordinates whose rows the moves read are added to it."""
    read = set() if read is None else read
    moves = 0
    for _ in range(max_moves):
        gs, bs, vmax, bi = 0.0, -1, -np.inf, -1
        for k, i in enumerate(ws):
            pg = _pg(G[i], r[i], gamma[i])
            if pg * pg / qd[i] > gs:
                gs, bs = pg * pg / qd[i], k
            if _up(y[i], r[i], gamma[i]) and -y[i] * G[i] > vmax:
                vmax, bi = -y[i] * G[i], k
        gp, bj = 0.0, -1
        if bi >= 0:
            i = ws[bi]
            for k, t in enumerate(ws):
                b = vmax + y[t] * G[t]
                if _low(y[t], r[t], gamma[t]) and b > 0.0:
                    a = max(kd[i] + kd[t] - 2.0 * float(K[i][t]) + 2.0 * mu, 1e-12)
                    if b * b / a > gp:
                        gp, bj = b * b / a, k
        if bj >= 0 and gp > gs:
            i, j = ws[bi], ws[bj]
            b = vmax + y[j] * G[j]
            a = max(kd[i] + kd[j] - 2.0 * float(K[i][j]) + 2.0 * mu, 1e-12)
            d = b / a
            room_i = gamma[i] - r[i] if y[i] > 0.0 else r[i]
            room_j = r[j] if y[j] > 0.0 else gamma[j] - r[j]
            d = min(d, room_i, room_j)
            if not d > 0.0:
                break
            r[i] = _clip(r[i] + y[i] * d, gamma[i]) if d < room_i else \
                (gamma[i] if y[i] > 0.0 else 0.0)
            r[j] = _clip(r[j] - y[j] * d, gamma[j]) if d < room_j else \
                (0.0 if y[j] > 0.0 else gamma[j])
            for t in ws:
                G[t] += d * y[t] * (float(K[i][t]) - float(K[j][t]))
            G[i] += mu * y[i] * d
            G[j] -= mu * y[j] * d
            read.update((i, j))
        elif bs >= 0:
            i = ws[bs]
            old = r[i]
            new = _clip(old - G[i] / qd[i], gamma[i])
            d = new - old
            if d == 0.0:
                break
            r[i] = new
            c = d * y[i]
            for t in ws:
                G[t] += c * y[t] * (float(K[i][t]) + 1.0)
            G[i] += d * mu
            read.add(i)
        else:
            break
        moves += 1
    return moves


def _problem(n, seed, dtype, start="inside", mu=0.1, twins=0):
    """A small RBF problem: K, y, gamma (with empty boxes), mu, kd, qd, r, G. ``start``:
    "inside" (r part-way, some coordinates at each bound) or "zero" (r = 0, G = -1, the
    solver's start: every coordinate ties); ``twins`` rows repeat earlier ones (K_ii +
    K_jj - 2 K_ij = 0: with mu = 0 the pair's curvature a is the floor 1e-12)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    if twins:
        X[n - twins:] = X[:twins]
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    K = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)).astype(dtype)
    gamma = rng.choice([0.0, 0.3, 1.0, 2.0], size=n, p=[0.1, 0.3, 0.3, 0.3])
    kd = np.diagonal(K).astype(np.float64)
    qd = kd + 1.0 + mu
    # a point part-way: some coordinates at 0, some at their box, some inside
    r = np.where(rng.random(n) < 0.5, 0.0, np.minimum(gamma, rng.random(n) * 2.0))
    if start == "zero":
        r[:] = 0.0
    Kf = K.astype(np.float64)
    G = y * ((Kf + 1.0) @ (y * r)) + mu * r - 1.0
    return K, y, gamma, mu, kd, qd, r, G


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("subset", [False, True])
@pytest.mark.parametrize("seed, start, mu, twins", [
    (0, "inside", 0.1, 0), (1, "inside", 0.1, 0), (2, "inside", 0.1, 0),
    (3, "zero", 0.1, 0),        # the solver's start: ties everywhere, the first one wins
    (4, "inside", 0.0, 12),     # repeated points and mu = 0: the curvature floor
])
def test_moves_follow_the_rule_bit_for_bit(dtype, subset, seed, start, mu, twins):
    n = 60
    K, y, gamma, mu, kd, qd, r, G = _problem(n, seed, dtype, start, mu, twins)
    ws = np.arange(n, dtype=np.int64)
    if subset:
        ws = np.sort(np.random.default_rng(seed).choice(n, 40, replace=False))
    r_ref, G_ref = r.copy(), G.copy()
    m_ref = _reference(list(ws), K, r_ref, G_ref, y, gamma, qd, kd, mu, 25)
    slot = np.arange(n, dtype=np.int64)
    m, need = kf.dcd_pairs(ws, K, slot, r, G, y, gamma, qd, kd, mu, 25)
    assert need == -1 and m == m_ref > 0
    np.testing.assert_array_equal(r, r_ref)
    np.testing.assert_array_equal(G[ws], G_ref[ws])
    assert np.all((r >= 0.0) & (r <= gamma))
    assert np.all(r[gamma == 0.0] == 0.0)


def test_moves_read_rows_through_slots_and_stop_before_a_missing_row():
    n = 50
    K, y, gamma, mu, kd, qd, r, G = _problem(n, 4, np.float32)
    ws = np.arange(n, dtype=np.int64)
    r_ref, G_ref, read = r.copy(), G.copy(), set()
    m_ref = _reference(list(ws), K, r_ref, G_ref, y, gamma, qd, kd, mu, 10, read)
    # a row cache holding the rows in reversed order, with stamps
    store = np.ascontiguousarray(K[::-1])
    slot = (n - 1 - np.arange(n)).astype(np.int64)
    stamp = np.zeros(n, dtype=np.int64)
    m, need = kf.dcd_pairs(ws, store, slot, r, G, y, gamma, qd, kd, mu, 10, stamp, 7)
    assert (m, need) == (m_ref, -1)
    np.testing.assert_array_equal(r, r_ref)
    np.testing.assert_array_equal(G, G_ref)
    # exactly the rows the moves read are stamped with the call's clock
    assert set(np.flatnonzero(stamp == 7).tolist()) == {int(slot[c]) for c in read}
    # with no row held, the call returns the coordinate it needs before any move
    r2, G2 = r.copy(), G.copy()
    m, need = kf.dcd_pairs(ws, store[:0], np.full(n, -1, dtype=np.int64), r2, G2, y,
                           gamma, qd, kd, mu, 10)
    assert m == 0 and 0 <= need < n
    np.testing.assert_array_equal(r2, r)
    np.testing.assert_array_equal(G2, G)


@pytest.mark.parametrize("bad", ["slot", "ws", "G", "y", "gamma", "qd", "kd", "stamp",
                                 "duplicates", "repeated"])
def test_moves_refuse_arrays_that_do_not_fit(bad):
    n = 20
    K, y, gamma, mu, kd, qd, r, G = _problem(n, 5, np.float64)
    ws = np.arange(n, dtype=np.int64)
    slot = np.arange(n, dtype=np.int64)
    stamp = None
    if bad == "slot":
        slot[3] = n
    elif bad == "ws":
        ws[2] = -1
    elif bad == "G":
        G = G[:-1].copy()
    elif bad == "y":
        y = y[:-1].copy()
    elif bad == "gamma":
        gamma = gamma[:-1].copy()
    elif bad == "qd":
        qd = qd[:-1].copy()
    elif bad == "kd":
        kd = kd[:-1].copy()
    elif bad == "stamp":
        stamp = np.zeros(n - 1, dtype=np.int64)
    elif bad == "duplicates":
        ws = np.arange(2 * n, dtype=np.int64) % n
    else:  # a repeated coordinate in a working set no longer than n
        ws = np.r_[0, np.arange(n - 1)].astype(np.int64)
    with pytest.raises(ValueError):
        kf.dcd_pairs(ws, K, slot, r, G, y, gamma, qd, kd, mu, 5, stamp, 1)


def test_row_cache_refuses_more_rows_than_it_holds():
    from marginkit.solvers.svm._kernel import _RowCache

    class Rows:
        n, dtype = 8, np.float64

        def block(self, idx, *_):
            return np.tile(np.asarray(idx, dtype=np.float64)[:, None], (1, self.n))

    cache = _RowCache(Rows(), 4)
    cache.bring(np.array([0, 1]))
    cache.bring(np.array([2, 3, 4, 5]))     # evicts 0 and 1, keeps what it brought
    assert sorted(cache.owner.tolist()) == [2, 3, 4, 5]
    assert np.array_equal(cache.store[cache.slot[[2, 3, 4, 5]], 0], [2, 3, 4, 5])
    with pytest.raises(ValueError, match="holds 4 rows"):
        cache.bring(np.array([0, 1, 2, 3, 4]))


@pytest.mark.parametrize("half", [0, 1, 7, 31])
@pytest.mark.parametrize("seed", [0, 1])
def test_fill_candidates_are_the_top_violators_not_held(half, seed):
    # the rows a fill computes beside the one a move needs: among the coordinates not
    # held, the half largest -y G where u can grow and the half largest y G where it can
    # shrink (continuous G: no ties)
    n = 200
    K, y, gamma, mu, kd, qd, r, G = _problem(n, seed, np.float64)
    rng = np.random.default_rng(seed)
    G = G + 1e-3 * rng.standard_normal(n)
    ws = np.sort(rng.choice(n, 150, replace=False)).astype(np.int64)
    held = rng.random(n) < 0.3
    need = int(ws[np.flatnonzero(~held[ws])[0]])
    out = np.empty(2 * half + 1, dtype=np.int64)
    m = kf.fill_candidates(ws, held.view(np.uint8), y, r, gamma, G, need, half, out)
    got = out[:m]
    free = np.array([c for c in ws if not held[c] and c != need], dtype=np.int64)
    want = {need}
    for ok, score in ((np.array([_up(y[c], r[c], gamma[c]) for c in free], dtype=bool),
                       -y * G),
                      (np.array([_low(y[c], r[c], gamma[c]) for c in free], dtype=bool),
                       y * G)):
        cand = free[ok]
        want.update(cand[np.argsort(-score[cand], kind="stable")[:half]].tolist())
    assert np.array_equal(got, np.sort(np.array(sorted(want), dtype=np.int64)))
    assert got.size == np.unique(got).size and not held[got[got != need]].any()
    for h, size in ((half, 2 * half), (2**62, 1), (2**63 - 1, 1)):
        with pytest.raises(ValueError, match="out must hold"):
            kf.fill_candidates(ws, held.view(np.uint8), y, r, gamma, G, need, h,
                               np.empty(size, dtype=np.int64))
