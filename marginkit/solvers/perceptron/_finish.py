"""The exact finish of ISNKPVN: Wolfe's minimum-norm-point algorithm alongside the
iterations (an extension of Ramdas & Pena 2014).

Every ``_FINISH_PERIOD`` steps the driver runs one major cycle of a ``MinNormPoint``
(``_fast``) on the problem min_{p in simplex} ||p||_G: a corral S of at most
``_FINISH_CAP`` vertices, new vertices priced by G p over all n points, one product with
G and O(|S|^2) more a cycle, started at the most violated point. Its optimum p* answers
exactly either way: G p* >= ||p*||_G^2 > 0 (a separator) unless ||p*||_G = 0 (a
certificate). A candidate is checked from scratch by the caller (``_IteratedState``) and
taken with ``accept_finish`` (the outer loop restarts at q = alpha = p) or dropped with
``refuse_finish``; the finish then stops for good. The finish needs all rows in one block.

The paper's reference is in the package docstring (``marginkit.solvers.perceptron``).

References
----------
P. Wolfe, "Finding the nearest point in a polytope", Mathematical Programming 11,
128-149, 1976.
"""
from ._fast import MinNormPoint
from ._blocks import _gnorm

# the finish runs one major cycle (about one pass over the data) every this many steps
_FINISH_PERIOD = 2
# the finish's corral holds at most this many vertices (an R factor of 256^2 doubles)
_FINISH_CAP = 256


def _setup_finish(block, op, finish_cap):
    """The block's ``MinNormPoint`` over ``op`` (None when ``finish_cap`` is 0: no finish)."""
    block.v["sb_fin"] = MinNormPoint(op, finish_cap) if finish_cap > 0 else None


def _k_fin_cycle(block, tol_sq):
    """One major cycle of the block's finish (started at the most violated point of G p
    when idle): (state, major cycles so far)."""
    fin = block.v["sb_fin"]
    if fin.state == "idle":
        fin.start_at(block.v["sb"].argmin_gp()[1])
    return fin.cycle(tol_sq), int(fin.steps)


def _k_fin_p(block):
    return block.v["sb_fin"].p_arr


def _k_fin_accept(block):
    """q = alpha = the finish's p, G alpha = its G p; ||p||_G^2. The finish stops."""
    sb, fin = block.v["sb"], block.v["sb_fin"]
    sb.set("q", fin.p_arr)
    sb.set("alpha", fin.p_arr)
    sb.set("ga", fin.gp_arr)
    fin.halt()
    return float(fin.norm_sq)


def _k_fin_halt(block):
    block.v["sb_fin"].halt()


class _ExactFinish:
    """The finish's part of ``SmoothedIteration`` (which provides ``ex``, ``_map``,
    ``_start_at``, ``gamma`` and the norms): its state, one major cycle every
    ``_FINISH_PERIOD`` steps, and the acceptance or refusal of its candidates."""

    def _init_finish(self, finish_cap):
        self.steps = 0
        self.finish_decided = False
        self._finish = "off" if finish_cap <= 0 else "idle"
        self.finish_steps = 0

    def _finish_step(self):
        """Count a step; every ``_FINISH_PERIOD``-th one, while the run is undecided, runs
        one major cycle of the finish."""
        self.steps += 1
        if (self._finish in ("idle", "running") and self.steps % _FINISH_PERIOD == 0
                and self.min_margin <= 0.0 and self.dual_norm > self.dual_tol):
            self._finish, self.finish_steps = self.ex.map(_k_fin_cycle,
                                                          self.dual_tol * self.dual_tol)[0]

    @property
    def finish_state(self):
        """"off", or the state of the finish's ``MinNormPoint``."""
        return self._finish

    def finish_p(self):
        return self.ex.map(_k_fin_p)[0]

    def accept_finish(self):
        """Take the finish's checked candidate p as the next prox-center: the outer loop
        restarts at q = alpha = p (delta = ||p||_G / gamma, k = 0, the paper's start, so
        its invariant holds), and p becomes the best p if its norm is lower. A separator
        candidate gives G alpha > 0 at once, a certificate ||best p||_G <= eps."""
        if self._finish not in ("separator", "certificate"):
            raise RuntimeError("the finish has no candidate to accept")
        norm = _gnorm(self.ex.map(_k_fin_accept)[0])
        if norm < self.dual_norm:
            self.dual_norm = norm
            self._map("copy", "best_p", "alpha")
        self.delta = norm / self.gamma
        self.outer += 1
        self._start_at(0)
        # taken once: the finish has done its work
        self._finish = "stopped"
        self.finish_decided = True

    def refuse_finish(self):
        """Drop a candidate that failed the caller's check; the finish stops for good."""
        if self._finish != "off":
            self.ex.map(_k_fin_halt)
            self._finish = "stopped"

    def finish_outcome(self):
        """``Result.extra["finish"]``: "off"; "decided" (the answer is the finish's);
        "stopped" (it gave up); "running"."""
        if self._finish == "off":
            return "off"
        if self.finish_decided:
            return "decided"
        return "stopped" if self._finish == "stopped" else "running"
