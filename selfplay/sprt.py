"""SPRT statistics of paired games: pentanomial counts, logistic Elo with a 95% interval, and
the generalised SPRT log-likelihood ratio (numpy only; scipy for the Student-t quantile).

Model (the one fishtest, OpenBench and fastchess publish as their "normalized" pentanomial
GSPRT; formulas from Michel Van den Bergh's notes "Normalized Elo" and "GSPRT approximation",
implemented here from the formulas, not from their code):

* A **pair** is two games of one opening, one with each colour. Its score x ∈ {0, ¼, ½, ¾, 1}
  (the mean of the two game scores) is one draw from a pentanomial distribution with
  frequencies ``(LL, LD, DD, WD, WW)``, LL first: both games lost, one lost one drawn, two draws
  or a win and a loss, one won one drawn, both won. ``x`` is the candidate's (first player's)
  score.
* **Elo** is logistic: ``elo(s) = −400·log10(1/s − 1)`` of the mean pair score ``s``. Its 95%
  interval is ``elo(s ± t·σ/√N)``: σ² the variance of the pair scores (maximum likelihood, /N),
  N the number of pairs, t the Student-t 0.975 quantile with N − 1 degrees of freedom (the
  variance is estimated; t → 1.95996 for large N). The reported "±" is half the interval's
  width, ``(elo(s + tσ/√N) − elo(s − tσ/√N)) / 2``.
* The **SPRT bounds** ``[elo0, elo1]`` are *normalized* Elo (nElo): ``nElo = (s − ½)/σ_game ·
  800/ln 10`` with the per-game standard deviation ``σ_game = √2·σ_pair``. So H_k says the pair
  distribution has t-value ``(s − ½)/σ_pair = √2·elo_k·ln10/800``. The GSPRT log-likelihood
  ratio is ``LLR = N·Σ_i f_i·ln(p1_i/p0_i)``, with f the observed frequencies and p_k the
  maximum-likelihood pentanomial distribution under the constraint of H_k (found by the
  iteration in :func:`_mle_tvalue`). ``model="logistic"`` instead takes the bounds as logistic
  Elo: the constraint is the mean score ``s_k = 1/(1 + 10^(−elo_k/400))``.
* **Stopping**: H1 (accept elo ≥ elo1) when ``LLR ≥ ln((1 − β)/α)``, H0 when
  ``LLR ≤ ln(β/(1 − α))``; α = β = 0.05 gives (−2.944, +2.944).
* Zero counts are replaced by 1e-3 before the MLE (as the published tools regularise), so that
  a distribution with empty cells still has a finite LLR.

With these choices the three seed-000 results are reproduced from their pentanomial counts
(tests/selfplay/test_sprt.py): e.g. PENTA (LL..WW) 15, 529, 1249, 703, 28 with bounds [0, 3]
gives LLR +3.09, Elo +13.77 ± 5.04 over 5048 games.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: pair scores of the five pentanomial cells, LL first
PAIR_SCORES = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
NELO_DIVIDED_BY_T = 800.0 / math.log(10.0)  # nElo = t-value (per game) · 800/ln10
MODELS = ("normalized", "logistic")
#: |elo0|, |elo1| beyond this are refused: the constrained MLE is only checked up to here
MAX_BOUND = 150.0


def logistic_elo(score: float) -> float:
    """Logistic Elo difference of a mean score in (0, 1); ±inf at 1 and 0."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0) + 0.0  # + 0.0: no "-0.00"


def elo_to_score(elo: float) -> float:
    """Expected score of a logistic Elo difference."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def bounds(alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """(lower, upper) LLR stopping bounds: (ln(β/(1−α)), ln((1−β)/α)). Raises ValueError unless
    0 < α, β < 1 and α + β < 1."""
    if not (0 < alpha < 1 and 0 < beta < 1 and alpha + beta < 1):
        raise ValueError(f"alpha={alpha}, beta={beta}: need 0 < alpha, beta < 1 and alpha + beta < 1")
    return math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha)


def check_penta(penta) -> np.ndarray:
    """Five non-negative integer counts LL, LD, DD, WD, WW -> float64 array. ValueError otherwise."""
    try:
        vals = [float(v) for v in penta]
    except (TypeError, ValueError):
        raise ValueError(f"pentanomial counts {penta!r}: five non-negative integers LL,LD,DD,WD,WW") from None
    if len(vals) != 5 or any(v < 0 or v != int(v) or not math.isfinite(v) for v in vals):
        raise ValueError(f"pentanomial counts {list(penta)!r}: five non-negative integers LL,LD,DD,WD,WW")
    return np.array(vals, dtype=np.float64)


def _mle_mean(f: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The distribution p maximising Σ f_i ln p_i subject to Σ p_i = 1 and Σ p_i h_i = 0:
    p_i = f_i / (1 + λ h_i), λ the root of Σ f_i h_i / (1 + λ h_i) = 0 (decreasing in λ on the
    interval where every 1 + λ h_i > 0), found by bisection. f: frequencies (sum 1, all > 0)."""
    hmax, hmin = float(h.max()), float(h.min())
    if hmax <= 0 or hmin >= 0:  # the constraint cannot be met inside the simplex's interior
        raise ValueError("the SPRT hypothesis is outside what the pair scores can reach")
    lo, hi = -1.0 / hmax, -1.0 / hmin
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        g = float(np.sum(f * h / (1.0 + mid * h)))
        if g > 0:
            lo = mid
        else:
            hi = mid
    lam = 0.5 * (lo + hi)
    p = f / (1.0 + lam * h)
    return p / p.sum()


def _mle_tvalue(f: np.ndarray, t: float, iters: int = 100) -> np.ndarray:
    """The MLE pentanomial distribution p with t-value (μ_p − ½)/σ_p = t.

    The constraint g(p) = μ − ½ − t·σ is linearised at the current p: since
    Σ p_i((a_i − μ)² + σ²)/(2σ) = σ, g(p) = Σ p_i h_i with
    h_i = a_i − ½ − t·((a_i − μ)² + σ²)/(2σ), μ and σ taken from the current p. Each step solves
    the linear-constraint MLE (:func:`_mle_mean`) for that h; the fixed point satisfies the
    exact constraint. Starts from the uniform distribution (whose σ is wide enough that h takes
    both signs even when f is concentrated on one cell, e.g. all draws); converges in a few tens
    of steps for the t-values of SPRT bounds."""
    a = PAIR_SCORES
    uniform = np.full_like(f, 1.0 / len(f))
    p = uniform
    for _ in range(iters):
        mu = float(np.sum(p * a))
        sigma = math.sqrt(max(float(np.sum(p * (a - mu) ** 2)), 1e-300))
        h = a - 0.5 - t * ((a - mu) ** 2 + sigma ** 2) / (2.0 * sigma)
        try:
            q = _mle_mean(f, h)
        except ValueError:  # the linearisation at p cannot be met: widen p and try again
            p = 0.5 * (p + uniform)
            continue
        if float(np.max(np.abs(q - p))) < 1e-14:
            p = q
            break
        p = q
    mu = float(np.sum(p * a))
    sigma = math.sqrt(float(np.sum(p * (a - mu) ** 2)))
    if not abs(mu - 0.5 - t * sigma) < 1e-8:
        raise ValueError(f"the SPRT bound (t-value {t:.3f} per pair) is beyond what these pair scores can fit")
    return p


@dataclass
class SprtResult:
    """Everything one SPRT evaluation reports. penta: LL..WW counts; elo: logistic Elo (nan when
    there are no pairs, ±inf for a clean sweep); elo_ci95: the ± (half-width of the 95% interval);
    elo_interval: (low, high); llr and its (lower, upper) bounds; verdict "H1" | "H0" |
    "inconclusive"; wdl: (W, D, L) game counts when known (a match knows them, bare penta
    counts do not: a DD pair is two draws or a win and a loss)."""

    penta: list[int]
    elo0: float
    elo1: float
    alpha: float
    beta: float
    model: str
    llr: float
    lower: float
    upper: float
    elo: float
    elo_ci95: float
    elo_interval: tuple[float, float]
    score: float
    verdict: str
    wdl: tuple[int, int, int] | None = None
    nelo: float = field(default=float("nan"))

    @property
    def pairs(self) -> int:
        return int(sum(self.penta))

    @property
    def games(self) -> int:
        return 2 * self.pairs

    def to_dict(self) -> dict:
        def num(x):
            return None if x is None or not math.isfinite(x) else round(float(x), 6)
        d = {"llr": num(self.llr), "llr_bounds": [num(self.lower), num(self.upper)], "elo": num(self.elo),
             "elo_ci95": num(self.elo_ci95), "elo_interval": [num(v) for v in self.elo_interval],
             "nelo": num(self.nelo), "score": num(self.score), "verdict": self.verdict, "games": self.games,
             "pairs": self.pairs, "penta": list(self.penta), "elo0": self.elo0, "elo1": self.elo1,
             "alpha": self.alpha, "beta": self.beta, "model": self.model}
        if self.wdl is not None:
            d["wdl"] = list(self.wdl)
        return d

    def lines(self) -> list[str]:
        """Seed 000's layout: LLR, ELO, GAMES, PENTA (PENTA printed LL first)."""
        def sgn(x, nd=2):
            return f"{x:+.{nd}f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf" if x < 0 else "nan")
        games = f"GAMES: {self.games}"
        if self.wdl is not None:
            w, d, l = self.wdl
            played = w + d + l
            # W/D/L count every game played; GAMES (and the SPRT) only those of finished pairs
            extra = f"; {played - self.games} more of an unfinished pair" if played > self.games else ""
            games += f" in pairs (W {w} / D {d} / L {l} of {played} played{extra})"
        return [f"LLR: {sgn(self.llr)} ({self.lower:+.2f}, {self.upper:+.2f}) [{self.elo0:.2f}, {self.elo1:.2f}]"
                f" {self.verdict}",
                f"ELO: {sgn(self.elo)} ± {self.elo_ci95:.2f}" if math.isfinite(self.elo_ci95)
                else f"ELO: {sgn(self.elo)} ± inf",
                games,
                "PENTA: [" + ", ".join(str(v) for v in self.penta) + "] (LL, LD, DD, WD, WW)"]


def elo_with_ci(penta) -> tuple[float, float, tuple[float, float], float]:
    """(elo, ±, (low, high), mean pair score) of pentanomial counts LL..WW (see the module
    docstring). No pairs: nan everywhere; one pair or zero variance: ± is inf."""
    from scipy.stats import t as student_t

    n = check_penta(penta)
    total = float(n.sum())
    if total == 0:
        nan = float("nan")
        return nan, nan, (nan, nan), nan
    f = n / total
    mu = float(np.sum(f * PAIR_SCORES))
    var = float(np.sum(f * (PAIR_SCORES - mu) ** 2))
    elo = logistic_elo(mu)
    if total < 2 or var == 0.0:
        return elo, math.inf, (-math.inf, math.inf), mu
    half = float(student_t.ppf(0.975, total - 1)) * math.sqrt(var / total)
    lo, hi = logistic_elo(mu - half), logistic_elo(mu + half)
    return elo, (hi - lo) / 2.0, (lo, hi), mu


def llr(penta, elo0: float, elo1: float, model: str = "normalized") -> float:
    """GSPRT log-likelihood ratio of H1 (elo = elo1) against H0 (elo = elo0) for pentanomial
    counts LL..WW (see the module docstring for the model). 0.0 with no pairs."""
    if model not in MODELS:
        raise ValueError(f"model={model!r}: one of {', '.join(MODELS)}")
    n = check_penta(penta)
    total = float(n.sum())
    if total == 0:
        return 0.0
    reg = np.where(n == 0, 1e-3, n)
    f = reg / reg.sum()
    if model == "normalized":
        t0, t1 = (math.sqrt(2.0) * e / NELO_DIVIDED_BY_T for e in (elo0, elo1))
        p0, p1 = _mle_tvalue(f, t0), _mle_tvalue(f, t1)
    else:
        p0, p1 = (_mle_mean(f, PAIR_SCORES - elo_to_score(e)) for e in (elo0, elo1))
    return float(total * np.sum(f * np.log(p1 / p0))) + 0.0


def sprt(penta, elo0: float = 0.0, elo1: float = 5.0, alpha: float = 0.05, beta: float = 0.05,
         model: str = "normalized", wdl: tuple[int, int, int] | None = None) -> SprtResult:
    """The full SPRT report of pentanomial counts ``penta`` = (LL, LD, DD, WD, WW). Raises
    ValueError for bad counts, α/β or ``elo0 >= elo1``."""
    n = check_penta(penta)
    if not (math.isfinite(elo0) and math.isfinite(elo1) and elo0 < elo1):
        raise ValueError(f"elo0={elo0}, elo1={elo1}: need elo0 < elo1")
    if max(abs(elo0), abs(elo1)) > MAX_BOUND:
        raise ValueError(f"elo0={elo0}, elo1={elo1}: SPRT bounds are limited to ±{MAX_BOUND:g} "
                         f"(normalized or logistic Elo; fishtest's are a few Elo)")
    lower, upper = bounds(alpha, beta)
    value = llr(n, elo0, elo1, model)
    elo, ci, interval, mu = elo_with_ci(n)
    verdict = "H1" if value >= upper else "H0" if value <= lower else "inconclusive"
    total = float(n.sum())
    nelo = float("nan")
    if total > 0:
        f = n / total
        sd = math.sqrt(float(np.sum(f * (PAIR_SCORES - mu) ** 2)))
        if sd > 0:
            nelo = (mu - 0.5) / (math.sqrt(2.0) * sd) * NELO_DIVIDED_BY_T
    return SprtResult([int(v) for v in n], float(elo0), float(elo1), float(alpha), float(beta), model, value,
                      lower, upper, elo, ci, interval, mu, verdict, wdl, nelo)


def penta_from_pairs(pair_scores) -> list[int]:
    """Pentanomial counts LL..WW from pair scores: each pair's two game scores of the first
    player (1, ½ or 0 each), or their sum in {0, ½, 1, 1½, 2}."""
    out = [0] * 5
    for p in pair_scores:
        s = sum(p) if isinstance(p, (tuple, list)) else p
        k = int(round(2 * s))
        if k < 0 or k > 4 or abs(2 * s - k) > 1e-9:
            raise ValueError(f"pair score {p!r}: the sum of two game scores in {{0, ½, 1}}")
        out[k] += 1
    return out
