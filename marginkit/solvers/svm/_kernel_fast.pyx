"""Cython loops of the exact-kernel SVM solvers (``marginkit.solvers.svm._kernel``).

The dual variables r, the box gamma (an n-vector, the scalar broadcast when unweighted)
and the labels y are float64 n-vectors; the kernel products K (y * r) are computed by the
caller (BLAS on a held Gram, or blocks of the kernel) and passed in. The Gram matrix, when
these loops read it, is the n x n matrix held by the caller (row i = column i: it is
symmetric) or the caller's row cache, float32 or float64 (``dcd_pairs`` reads it to choose
and make its moves; ``stored_product`` accumulates a product from it in float64 for a
bound that counts the rows' rounding).

Formulations (docs/svm.md, "Exact kernels"): ``augmented`` (H-SVM, intercept
regularized) has Q = Y (K + 1 1^T) Y + mu I, i.e. the margin theta_i = y_i (f_i + t) with
f = K (y * r) and t = y^T r; otherwise (classical SVM) Q = Y K Y + mu I.
"""
import numpy as np
from cython cimport floating
from libc.math cimport sqrt, fabs, INFINITY


cdef inline double _clip(double v, double hi) noexcept nogil:
    if v < 0.0:
        return 0.0
    if v > hi:
        return hi
    return v



def _same_lengths(str what, Py_ssize_t n, **arrays):
    # the vectors a loop below reads at 0..n-1 (the compiled loops do not check bounds)
    for name, a in arrays.items():
        if a.shape[0] != n:
            raise ValueError(f"{what}: {name} has {a.shape[0]} entries, {n} expected (one "
                             "per point)")


def fista_point(const double[::1] r, const double[::1] r_prev, const double[::1] f,
                const double[::1] f_prev, const double[::1] y, const double[::1] gamma,
                double t, double t_prev, double beta, double L, double mu, bint augmented,
                double[::1] yk, double[::1] out):
    """The extrapolated point y_k = r + beta (r - r_prev) and the gradient step from it.

    ``f`` = K (y * r), ``f_prev`` = K (y * r_prev): K (y * y_k) = (1 + beta) f - beta f_prev
    by linearity (exact up to rounding, no product). ``t``, ``t_prev`` are y^T r and
    y^T r_prev (H-SVM; ignored otherwise). Writes y_k into ``yk`` and
    y_k + grad g(y_k) / L into ``out``; with ``augmented`` ``out`` is then clipped to the box
    [0, gamma_i] (the classical SVM projects onto the box and the hyperplane afterwards).
    Returns ||y_k - out||^2 (meaningful for ``augmented``; 0 otherwise).
    """
    cdef Py_ssize_t i, n = r.shape[0]
    cdef double b1 = 1.0 + beta, ti = 0.0, g, v, dsq = 0.0, dd
    _same_lengths("fista_point", n, r_prev=r_prev, f=f, f_prev=f_prev, y=y, gamma=gamma,
                  yk=yk, out=out)
    if augmented:
        ti = b1 * t - beta * t_prev
    with nogil:
        for i in range(n):
            v = b1 * r[i] - beta * r_prev[i]
            yk[i] = v
            g = 1.0 - mu * v - y[i] * (b1 * f[i] - beta * f_prev[i] + ti)
            v = v + g / L
            if augmented:
                v = _clip(v, gamma[i])
                dd = yk[i] - v
                dsq += dd * dd
            out[i] = v
    return dsq


def diff_sq(const double[::1] a, const double[::1] b):
    """||a - b||^2."""
    cdef Py_ssize_t i, n = a.shape[0]
    cdef double acc = 0.0, d
    _same_lengths("diff_sq", n, b=b)
    with nogil:
        for i in range(n):
            d = a[i] - b[i]
            acc += d * d
    return acc


def projected_gradient_sq(const double[::1] G, const double[::1] r, const double[::1] gamma):
    """||p(r)||^2 for the minimization gradient G = Q r - e of the dual (p_i = min(G_i, 0)
    at r_i = 0, max(G_i, 0) at r_i = gamma_i, G_i between; 0 for a box [0, 0], a point of
    weight 0, where both bounds hold)."""
    cdef Py_ssize_t i, n = r.shape[0]
    cdef double acc = 0.0, g
    _same_lengths("projected_gradient_sq", n, G=G, gamma=gamma)
    with nogil:
        for i in range(n):
            g = G[i]
            if gamma[i] <= 0.0:
                g = 0.0
            elif r[i] <= 0.0:
                if g > 0.0:
                    g = 0.0
            elif r[i] >= gamma[i]:
                if g < 0.0:
                    g = 0.0
            acc += g * g
    return acc


cdef inline double _pg(double g, double r, double gam) noexcept nogil:
    if gam <= 0.0:
        return 0.0  # a box [0, 0] (weight 0): both bounds hold
    if r <= 0.0:
        return g if g < 0.0 else 0.0
    if r >= gam:
        return g if g > 0.0 else 0.0
    return g


# Where a coordinate's r sits in its box, with its label: code = 2 s + (y > 0), s = 0 at
# the lower bound (r <= 0 < gamma), 1 strictly inside, 2 at the upper bound (r >= gamma > 0),
# 3 for an empty box (gamma <= 0, weight 0). The moves' scans read what they need of it from
# these tables instead of comparing r with its bounds (branches on those comparisons follow
# no pattern along the coordinates and are mispredicted about half the time: the scans ran
# 6x slower). p = min(max(G, _P_LO), _P_HI) is the projected gradient (``_pg``).
cdef double[8] _P_LO = [-INFINITY, -INFINITY, -INFINITY, -INFINITY, 0.0, 0.0, 0.0, 0.0]
cdef double[8] _P_HI = [0.0, 0.0, INFINITY, INFINITY, INFINITY, INFINITY, 0.0, 0.0]
# added to -y G: 0 where u = y r can grow (LIBSVM's I_up), -inf elsewhere
cdef double[8] _UP = [-INFINITY, 0.0, 0.0, 0.0, 0.0, -INFINITY, -INFINITY, -INFINITY]
# 1 where u = y r can shrink (LIBSVM's I_low), 0 elsewhere
cdef double[8] _LOW = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
# 0.0 and 1.0, indexed by a condition
cdef double[2] _ONE_IF = [0.0, 1.0]


cdef inline char _code(double y, double r, double gam) noexcept nogil:
    cdef char s
    if gam <= 0.0:
        s = 3
    elif r <= 0.0:
        s = 0
    elif r >= gam:
        s = 2
    else:
        s = 1
    return 2 * s + (1 if y > 0.0 else 0)


cdef struct _Pick:
    # the next move's candidates: the best single coordinate (position bs in the working
    # set, gain gs = p^2 / Q_ii) and the first coordinate of a pair (position bi, the
    # largest -y G among those whose u = y r can grow: vmax)
    double gs
    Py_ssize_t bs
    double vmax
    Py_ssize_t bi


cdef inline void _pick_reset(_Pick* p) noexcept nogil:
    p.gs = 0.0
    p.bs = -1
    p.vmax = -INFINITY
    p.bi = -1


cdef inline void _pick_see(_Pick* p, Py_ssize_t k, double G, double y, char c,
                           double qd) noexcept nogil:
    # coordinate k of the working set (gradient G, label y, code c) in the running choice
    # (the first of equals wins)
    cdef double pg = G if G > _P_LO[c] else _P_LO[c]
    cdef double v = -y * G + _UP[c]
    pg = pg if pg < _P_HI[c] else _P_HI[c]
    cdef double s = pg * pg / qd
    if s > p.gs:
        p.gs = s
        p.bs = k
    if v > p.vmax:
        p.vmax = v
        p.bi = k


def dcd_pairs(const long[::1] ws, const floating[:, ::1] rows, const long[::1] slot,
              double[::1] r, double[::1] G, const double[::1] y, const double[::1] gamma,
              const double[::1] qd, const double[::1] kd, double mu, Py_ssize_t max_moves,
              long[::1] stamp=None, long clock=0):
    """Greedy dual coordinate descent on the H-SVM dual (Q = Y (K + 1 1^T) Y + mu I over
    0 <= r <= gamma; Hsieh et al. 2008 for the exact coordinate step) with LIBSVM's pair
    moves (Chang and Lin 2011; second-order selection, Fan, Chen and Lin 2005), the
    gradient G = Q r - e kept up to date on the working set ``ws`` (the active
    coordinates, distinct; the others' G is recomputed on unshrinking).

    Each move is the better, by the decrease of the dual objective its unclipped step
    gives, of the best single coordinate of ws (p_i^2 / Q_ii, p the projected gradient;
    r_i <- proj_[0, gamma_i](r_i - G_i / Q_ii)) and the best pair: i the coordinate of ws
    with the largest -y_i G_i whose u_i = y_i r_i can grow, j the one whose u_j can shrink
    maximizing b^2 / a, b = -y_i G_i + y_j G_j > 0, a = K_ii + K_jj - 2 K_ij + 2 mu. A pair
    move changes u_i by +delta and u_j by -delta, delta = min(b / a, the room of both
    boxes): y^T r stays, so the rank-one part 1 1^T of Q (and the near-constant part of an
    RBF Gram matrix) does not slow it down, while single moves settle y^T r (the
    regularized intercept). The candidates of the next move are chosen in the same pass
    over ws as the update of G (two passes per move: the update with the next choice of
    i, and the choice of j).

    K[c, :] is row slot[c] of ``rows`` (float32 or float64; the held Gram matrix with
    slot[c] = c, or a row cache), slot[c] = -1 when not computed: only the rows of the
    chosen coordinates are read, and the call returns before a move that needs a missing
    row. ``kd`` is the diagonal of K. ``stamp``: stamp[slot[c]] = ``clock`` for every row
    read (the cache's least-recently-used order). Stops after ``max_moves`` moves or when
    no move decreases the objective. Returns (moves, need): need is the missing row's
    coordinate, -1 when the call stopped for another reason."""
    cdef Py_ssize_t n = r.shape[0], q = ws.shape[0], k, i, t, j, bj, mv, c, si, sj
    cdef Py_ssize_t nrows = rows.shape[0]
    cdef double gp, b, a, old, new, d, room_i, room_j, ci, cj, val, g
    cdef const floating* rowi
    cdef const floating* rowj
    cdef Py_ssize_t moves = 0, need = -1
    cdef _Pick pick
    cdef char[::1] code
    if slot.shape[0] != n or (nrows > 0 and rows.shape[1] != n):
        raise ValueError("slot must map the n coordinates to rows of K[:, :n]")
    if G.shape[0] != n or y.shape[0] != n or gamma.shape[0] != n or qd.shape[0] != n:
        raise ValueError("G, y, gamma and qd must have one entry per coordinate")
    if kd.shape[0] != n:
        raise ValueError("kd must be the diagonal of K")
    if stamp is not None and stamp.shape[0] < nrows:
        raise ValueError("stamp must hold one entry per row")
    if q > n:
        raise ValueError("ws must hold distinct coordinates")
    for c in range(n):
        if not -1 <= slot[c] < nrows:
            raise ValueError("slot must index rows (or be -1)")
    # code marks the coordinates seen here (a repeated one would have its G updated
    # twice a move); the loop below overwrites the marks with the codes
    code = np.zeros(n, dtype=np.int8)
    for k in range(q):
        if not 0 <= ws[k] < n:
            raise ValueError("ws must index r")
        if code[ws[k]]:
            raise ValueError("ws must hold distinct coordinates")
        code[ws[k]] = 1
    with nogil:
        _pick_reset(&pick)
        for k in range(q):
            t = ws[k]
            code[t] = _code(y[t], r[t], gamma[t])
            _pick_see(&pick, k, G[t], y[t], code[t], qd[t])
        for mv in range(max_moves):
            bj = -1
            gp = 0.0
            if pick.bi >= 0:
                i = ws[pick.bi]
                si = slot[i]
                if si < 0:
                    need = i
                    break
                rowi = &rows[si, 0]
                for k in range(q):
                    t = ws[k]
                    b = pick.vmax + y[t] * G[t]
                    a = kd[i] + kd[t] - 2.0 * rowi[t] + 2.0 * mu
                    a = a if a > 1e-12 else 1e-12
                    # b^2 / a where u_t can shrink and b > 0, 0 elsewhere (factors read
                    # from tables: the compiler turns a select on b > 0 into a branch)
                    val = b * b / a * _LOW[code[t]] * _ONE_IF[b > 0.0]
                    if val > gp:
                        gp = val
                        bj = k
            if bj >= 0 and gp > pick.gs:
                i = ws[pick.bi]
                j = ws[bj]
                si = slot[i]
                sj = slot[j]
                if sj < 0:
                    need = j
                    break
                rowi = &rows[si, 0]
                rowj = &rows[sj, 0]
                b = pick.vmax + y[j] * G[j]
                a = kd[i] + kd[j] - 2.0 * rowi[j] + 2.0 * mu
                if a < 1e-12:
                    a = 1e-12
                d = b / a
                room_i = gamma[i] - r[i] if y[i] > 0.0 else r[i]
                room_j = r[j] if y[j] > 0.0 else gamma[j] - r[j]
                if room_i < d:
                    d = room_i
                if room_j < d:
                    d = room_j
                if not d > 0.0:
                    break
                # u_i += d, u_j -= d (r_i += y_i d, r_j -= y_j d), exactly onto a bound
                # that is reached
                if d < room_i:
                    r[i] = _clip(r[i] + y[i] * d, gamma[i])
                else:
                    r[i] = gamma[i] if y[i] > 0.0 else 0.0
                if d < room_j:
                    r[j] = _clip(r[j] - y[j] * d, gamma[j])
                else:
                    r[j] = 0.0 if y[j] > 0.0 else gamma[j]
                code[i] = _code(y[i], r[i], gamma[i])
                code[j] = _code(y[j], r[j], gamma[j])
                # G += Q[:, i] y_i d - Q[:, j] y_j d (the 1 1^T parts cancel), and the
                # next move's candidates
                ci = mu * y[i] * d
                cj = mu * y[j] * d
                _pick_reset(&pick)
                for k in range(q):
                    t = ws[k]
                    g = G[t] + d * y[t] * (<double>rowi[t] - <double>rowj[t])
                    if t == i:
                        g = g + ci
                    elif t == j:
                        g = g - cj
                    G[t] = g
                    _pick_see(&pick, k, g, y[t], code[t], qd[t])
                if stamp is not None:
                    stamp[si] = clock
                    stamp[sj] = clock
                moves += 1
            elif pick.bs >= 0:
                i = ws[pick.bs]
                si = slot[i]
                if si < 0:
                    need = i
                    break
                old = r[i]
                new = _clip(old - G[i] / qd[i], gamma[i])
                d = new - old
                if d == 0.0:
                    break
                r[i] = new
                code[i] = _code(y[i], new, gamma[i])
                # G += d Q[:, i], Q[t, i] = y_t y_i (K_ti + 1) + mu [t == i], and the
                # next move's candidates
                rowi = &rows[si, 0]
                ci = d * y[i]
                _pick_reset(&pick)
                for k in range(q):
                    t = ws[k]
                    g = G[t] + ci * y[t] * (<double>rowi[t] + 1.0)
                    if t == i:
                        g = g + d * mu
                    G[t] = g
                    _pick_see(&pick, k, g, y[t], code[t], qd[t])
                if stamp is not None:
                    stamp[si] = clock
                moves += 1
            else:
                break
    return moves, need


cdef inline Py_ssize_t _keep_top(double* sc, long* ix, Py_ssize_t m, Py_ssize_t k,
                                 double v, long c) noexcept nogil:
    # (sc, ix)[:m] sorted by decreasing sc, at most k of them: insert (v, c) when it beats
    # the smallest (strictly: the first of equals stays); returns the new m
    cdef Py_ssize_t p
    if m == k:
        if not v > sc[m - 1]:
            return m
        m -= 1
    p = m
    while p > 0 and v > sc[p - 1]:
        sc[p] = sc[p - 1]
        ix[p] = ix[p - 1]
        p -= 1
    sc[p] = v
    ix[p] = c
    return m + 1


def stored_product(const long[::1] idx, const floating[:, ::1] rows, const long[::1] slot,
                   const double[::1] v, double[::1] out, double[::1] mag):
    """out += sum_j v_j K[j, :] and mag += sum_j |v_j| |K[j, :]| over j in ``idx`` (rows
    held: K[j, :] is row slot[j] >= 0 of ``rows``), accumulated in float64 from the
    stored values (exact in float64): one read of each row.

    The caller (``_kernel._Gram.stored_product``) checks the lengths, and that every
    slot[j] of idx is a row of ``rows``."""
    cdef Py_ssize_t n = rows.shape[1], m = idx.shape[0], k, i
    cdef long j, s
    cdef double vj, aj
    if out.shape[0] != n or mag.shape[0] != n or slot.shape[0] != v.shape[0]:
        raise ValueError("stored_product: out, mag, slot and v have the wrong lengths")
    for k in range(m):
        j = idx[k]
        if j < 0 or j >= slot.shape[0]:
            raise ValueError(f"stored_product: index {j} out of range")
        s = slot[j]
        if s < 0 or s >= rows.shape[0]:
            raise ValueError(f"stored_product: row {j} is not held")
    with nogil:
        for k in range(m):
            j = idx[k]
            s = slot[j]
            vj = v[j]
            aj = fabs(vj)
            for i in range(n):
                out[i] += vj * rows[s, i]
                mag[i] += aj * fabs(rows[s, i])


def fill_candidates(const long[::1] ws, const unsigned char[::1] held, const double[::1] y,
                    const double[::1] r, const double[::1] gamma, const double[::1] G,
                    Py_ssize_t need, Py_ssize_t half, long[::1] out):
    """The rows a fill computes with row ``need`` (``_kernel._Gram.bring``): need, then,
    among the coordinates of ``ws`` whose rows are not held (held[c] == 0) other than
    need, the ``half`` with the largest -y_c G_c where u_c = y_c r_c can grow and the
    ``half`` with the largest y_c G_c where it can shrink (LIBSVM's order, the rows the
    moves are likely to read next; the first of equals). Writes them sorted and distinct
    into out[:m] (out holds at least 2 half + 1 entries) and returns m."""
    cdef Py_ssize_t n = r.shape[0], q = ws.shape[0], k, m_up = 0, m_low = 0, m, a, b
    cdef Py_ssize_t kk = half if half > 0 else 0
    cdef long c
    cdef char cd
    cdef double g
    if held.shape[0] != n or y.shape[0] != n or gamma.shape[0] != n or G.shape[0] != n:
        raise ValueError("held, y, gamma and G must have one entry per coordinate")
    if not 0 <= need < n:
        raise ValueError("need must index r")
    if out.shape[0] < 1 or kk > (out.shape[0] - 1) // 2:  # 2 half + 1 may overflow
        raise ValueError("out must hold 2 half + 1 entries")
    for k in range(q):
        if not 0 <= ws[k] < n:
            raise ValueError("ws must index r")
    sc_up = np.empty(kk + 1)
    sc_low = np.empty(kk + 1)
    ix_up = np.empty(kk + 1, dtype=np.int64)
    ix_low = np.empty(kk + 1, dtype=np.int64)
    cdef double[::1] su = sc_up, sl = sc_low
    cdef long[::1] iu = ix_up, il = ix_low
    with nogil:
        if kk > 0:
            for k in range(q):
                c = ws[k]
                if held[c] or c == need:
                    continue
                # I_up and I_low as the moves read them (``_code``, ``_UP``, ``_LOW``)
                cd = _code(y[c], r[c], gamma[c])
                g = G[c]
                if _UP[cd] == 0.0:
                    m_up = _keep_top(&su[0], &iu[0], m_up, kk, -y[c] * g, c)
                if _LOW[cd] != 0.0:
                    m_low = _keep_top(&sl[0], &il[0], m_low, kk, y[c] * g, c)
        # need and both lists, sorted (insertion: at most 2 half + 1 entries), distinct
        out[0] = need
        m = 1
        for k in range(m_up + m_low):
            c = iu[k] if k < m_up else il[k - m_up]
            a = m
            while a > 0 and out[a - 1] > c:
                a -= 1
            if a > 0 and out[a - 1] == c:
                continue
            b = m
            while b > a:
                out[b] = out[b - 1]
                b -= 1
            out[a] = c
            m += 1
    return m


def active_violations(const double[::1] G, const double[::1] r, const double[::1] gamma,
                      const double[::1] qd, const long[::1] active, double[::1] score):
    """``violations`` on the coordinates ``active`` (score[k] for coordinate active[k]):
    returns (sum of p_i^2, max p_i, min p_i) over them."""
    cdef Py_ssize_t k, i, na = active.shape[0], n = r.shape[0]
    cdef double acc = 0.0, pg, hi = -INFINITY, lo = INFINITY
    _same_lengths("active_violations", n, G=G, gamma=gamma, qd=qd)
    if score.shape[0] < na:
        raise ValueError("score must hold one entry per active coordinate")
    for k in range(na):
        if not 0 <= active[k] < n:
            raise ValueError("active must index r")
    with nogil:
        for k in range(na):
            i = active[k]
            pg = _pg(G[i], r[i], gamma[i])
            acc += pg * pg
            score[k] = pg * pg / qd[i]
            if pg > hi:
                hi = pg
            if pg < lo:
                lo = pg
    return acc, hi, lo


def shrink_mask(const double[::1] G, const double[::1] r, const double[::1] gamma,
                const long[::1] active, double upper, double lower, char[::1] keep):
    """LIBLINEAR's shrinking test (Hsieh et al. 2008, section 3.2) on the coordinates
    ``active``: keep[k] = 0 for a coordinate at its lower bound with G_i > ``upper`` (the
    largest projected gradient of the previous pass, > 0) or at its upper bound with
    G_i < ``lower`` (the smallest one, < 0), 1 otherwise. Returns the number kept."""
    cdef Py_ssize_t k, i, na = active.shape[0], n = r.shape[0], kept = 0
    cdef double g
    if keep.shape[0] < na:
        raise ValueError("keep must hold one entry per active coordinate")
    for k in range(na):
        if not 0 <= active[k] < n:
            raise ValueError("active must index r")
    with nogil:
        for k in range(na):
            i = active[k]
            g = G[i]
            if (r[i] <= 0.0 and g > upper) or (gamma[i] > 0.0 and r[i] >= gamma[i]
                                                and g < lower):
                keep[k] = 0
            else:
                keep[k] = 1
                kept += 1
    return kept


def violations(const double[::1] G, const double[::1] r, const double[::1] gamma,
               const double[::1] qd, double[::1] score):
    """score_i = p_i^2 / Q_ii (the decrease of the dual objective of an exact step on
    coordinate i, up to the clip); returns (||p||^2, max p, min p)."""
    cdef Py_ssize_t i, n = r.shape[0]
    cdef double acc = 0.0, pg, hi = -INFINITY, lo = INFINITY
    _same_lengths("violations", n, G=G, gamma=gamma, qd=qd, score=score)
    with nogil:
        for i in range(n):
            pg = _pg(G[i], r[i], gamma[i])
            acc += pg * pg
            score[i] = pg * pg / qd[i]
            if pg > hi:
                hi = pg
            if pg < lo:
                lo = pg
    return acc, hi, lo
