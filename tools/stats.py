"""The one rule that says whether a difference between two cells is a finding: ``tools.stats.compare``.

A *cell* is one setting trained with k seeds and scored on one test set of N examples. Its accuracy moves for two
reasons, and the rule counts both (Bouthillier et al. 2021, *Accounting for Variance in Machine Learning
Benchmarks*; Dror et al. 2018, *The Hitchhiker's Guide to Testing Statistical Significance in NLP*):

- **the seeds** (training randomness: initialisation, order, dropout, even the number of CPU threads). Averaging k
  seeds divides this part by k. Each cell's own seeds measure it: ``s_A^2 / k_A``.
- **the test examples** (which N examples the test set happens to hold). Every seed of every cell is scored on the
  *same* examples, so this part never shrinks with seeds. What matters is how differently the two cells fare
  example by example: with per-example predictions it is the *paired* variance ``Var_i(delta_i) / N``, ``delta_i``
  the difference of the two cells' seed-averaged correctness on example i, less the part of it that is the seeds'
  own flipping (each example's spread over seeds, divided by the seeds: it is already in the first term).

By the law of total variance, ``Var(mean_A - mean_B) = s_A^2/k_A + s_B^2/k_B + V_test``. The difference is
divided by the square root of that sum and compared with Student's t at 97.5% (a two-sided 5% test) on the
Welch-Satterthwaite degrees of freedom: with 3 seeds a side the seed term rests on about 4 of them, and
t(0.975, 4) = 2.78, not 2. ``noise`` below is that threshold in points: a difference beyond it is a finding.

Where a side has no per-example predictions (records written before they were kept, or cells scored on different
test sets), the test term falls back to the *unpaired* binomial variance of each cell,
``acc_A (1 - acc_A) / N_A + acc_B (1 - acc_B) / N_B``, not divided by the seeds: conservative, since two models'
errors on one test set are positively correlated. The verdict names the rule that judged it (``paired`` or
``unpaired``), and so does every table.

A trained cell with one seed has no seed spread of its own. It borrows the other cell's when that is trained with
2+ seeds that spread (both seed terms then rest on that one estimate, and count once, with its k - 1 degrees of
freedom); against a deterministic cell, or seeds that all scored alike, it is *not judged* (``NO_SPREAD``: a spread
of 0 would leave its own training randomness out), and two trained cells of one seed each are *not judged*
(``one seed each``). Deterministic cells (a fixed pretrained model, a probe: no training randomness at all,
``deterministic=True``) have no seed term: two of them are judged on the test term alone.

``against(cell, target)`` is the same rule with one side: a cell against a fixed number (a target, a published
score).

``tests/tools/test_stats.py`` calibrates the rule: simulated null comparisons (one config twice; two models of equal
accuracy whose errors fall on different examples; one config twice whose seeds exchange which examples are right),
seed spreads of 0.1 to 1.0 points, are called findings 3.2-5.1% of the time (docs/results/calibration.md); the rule
the essay used before (a pooled sigma, 2 standard errors, the test term divided by the seeds) calls up to 12%, the
unpaired conservative one 0-3%, and this rule's own unpaired fallback (the same pairs, predictions withheld:
``FALLBACK``) 0-1.7%, with little power. ``calibrate()`` prints the same table.

    from tools.stats import Cell, compare
    v = compare(Cell([0.57, 0.58, 0.59], correct=matrix_a), Cell([0.55, 0.56, 0.57], correct=matrix_b))
    v.diff, v.noise, v.verdict, v.rule    # 0.02, 0.016, "A higher", "paired"
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.predictions import decode_correct

LEVEL = 0.05  # two-sided
NOT_JUDGED = "one seed each: not judged"
NO_SPREAD = "one seed against no seed spread: not judged"  # a deterministic cell, or seeds that all agree
LEVEL_ANSWER = "no difference measurable here"


@dataclass
class Cell:
    """One setting: ``accs`` the test accuracy (or any mean score) of each seed; ``correct`` optionally the
    per-example scores, a (seeds, N) array (1/0 for right/wrong) in the test split's order, with ``fingerprint``
    naming that split; ``n`` the test set's size when ``correct`` is absent; ``deterministic`` for a cell with no
    training randomness (one value, the same every time)."""

    accs: Sequence[float]
    correct: np.ndarray | None = None
    fingerprint: str | None = None
    n: int | None = None
    deterministic: bool = False

    def __post_init__(self):
        self.accs = [float(a) for a in self.accs]
        if self.correct is not None:
            self.correct = np.asarray(self.correct, dtype=float)
            if self.correct.ndim == 1:
                self.correct = self.correct[None, :]
            if self.correct.shape[0] != len(self.accs):
                raise ValueError(f"{self.correct.shape[0]} rows of predictions for {len(self.accs)} seeds")
            self.n = self.correct.shape[1]

    @property
    def k(self) -> int:
        return len(self.accs)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.accs)

    @property
    def seed_var(self) -> float | None:
        """The variance of one seed's accuracy (unbiased); 0 for a deterministic cell; None with one seed."""
        if self.deterministic:
            return 0.0
        return statistics.variance(self.accs) if self.k > 1 else None


@dataclass
class Verdict:
    diff: float | None  # mean(A) - mean(B)
    noise: float | None  # the threshold: t(0.975, df) * standard error
    verdict: str  # "A higher" | "B higher" | LEVEL_ANSWER | NOT_JUDGED | "not run yet"
    rule: str = ""  # "paired" | "unpaired" | ""
    se: float | None = None
    df: float | None = None
    parts: dict = field(default_factory=dict)  # the variance terms: seeds_a, seeds_b, test

    def as_dict(self) -> dict:
        return {
            "diff": self.diff,
            "noise": self.noise,
            "verdict": self.verdict,
            "rule": self.rule,
            "se": self.se,
            "df": self.df,
        }

    @property
    def finding(self) -> bool:
        return self.verdict in ("A higher", "B higher")


def paired(a: Cell, b: Cell) -> bool:
    """Can A and B be compared example by example? Both carry predictions on the same test split."""
    if a.correct is None or b.correct is None or a.n != b.n:
        return False
    return a.fingerprint == b.fingerprint


def test_variance(a: Cell, b: Cell) -> tuple[float, float, str]:
    """The test-set term of Var(mean_A - mean_B), its degrees of freedom and the rule's name."""
    if paired(a, b):
        ca, cb = a.correct, b.correct
        delta = ca.mean(0) - cb.mean(0)
        n = len(delta)
        raw = delta.var(ddof=1)
        # each example's own flipping from seed to seed is in the seed term already: take it out once
        flip = (ca.var(0, ddof=1).mean() / a.k if a.k > 1 and not a.deterministic else 0.0) + (
            cb.var(0, ddof=1).mean() / b.k if b.k > 1 and not b.deterministic else 0.0
        )
        return max(raw - flip, 0.0) / n, n - 1, "paired"
    na, nb = a.n, b.n
    if not na or not nb:
        raise ValueError("a cell without predictions needs its test set's size (Cell(n=...)) for the unpaired rule")
    var = a.mean * (1 - a.mean) / na + b.mean * (1 - b.mean) / nb
    return var, min(na, nb) - 1, "unpaired"


def t_quantile(df: float, level: float = LEVEL) -> float:
    """Student's t at 1 - level/2 (scipy when present, else a Cornish-Fisher series good to 1e-3 for df >= 2)."""
    try:
        from scipy.stats import t

        return float(t.ppf(1 - level / 2, df))
    except ImportError:  # pragma: no cover - scipy is in requirements.txt
        z = statistics.NormalDist().inv_cdf(1 - level / 2)
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        return z + g1 / df + g2 / df**2 + g3 / df**3


def compare(a: Cell, b: Cell, level: float = LEVEL) -> Verdict:
    """Judge mean(A) - mean(B) by the rule of this module's docstring."""
    if not a.accs or not b.accs:
        return Verdict(None, None, "not run yet")
    diff = a.mean - b.mean
    va, vb = a.seed_var, b.seed_var
    if va is None or vb is None:  # a trained cell of one seed: a spread to borrow, or no verdict
        other = b if va is None else a
        if other.seed_var is None or other.deterministic or not other.seed_var:
            return Verdict(diff, None, NOT_JUDGED if other.seed_var is None else NO_SPREAD)
    va = vb if va is None else va  # one seed on one side: it borrows the other side's spread
    vb = va if vb is None else vb
    dfa = (a.k - 1) if a.k > 1 else (b.k - 1)
    dfb = (b.k - 1) if b.k > 1 else (a.k - 1)
    seeds_a, seeds_b = va / a.k, vb / b.k
    test, df_test, rule = test_variance(a, b)
    borrowed = ("seeds_a", "seeds_b") if (a.seed_var is None) != (b.seed_var is None) else ()
    terms = {"seeds_a": (seeds_a, dfa), "seeds_b": (seeds_b, dfb), "test": (test, df_test)}
    return judged(diff, terms, rule, level, one_estimate=borrowed)


def judged(
    diff: float, terms: dict[str, tuple[float, float]], rule: str, level: float = LEVEL, one_estimate: tuple = ()
) -> Verdict:
    """The verdict on ``diff`` whose variance is the sum of ``terms`` (name: (variance, its degrees of freedom)):
    Student's t at the Welch-Satterthwaite df of the sum, two-sided at ``level``. The terms named in
    ``one_estimate`` are multiples of one estimated variance (a spread one cell borrows from the other): they
    count as one term, with that estimate's degrees of freedom, not as independent estimates."""
    total = sum(v for v, _ in terms.values())
    if total <= 0:
        return Verdict(diff, 0.0, LEVEL_ANSWER if diff == 0 else ("A higher" if diff > 0 else "B higher"), rule)
    # Welch-Satterthwaite: how many degrees of freedom the estimated variance rests on
    estimates = [t for name, t in terms.items() if name not in one_estimate]
    if one_estimate:
        estimates.append((sum(terms[name][0] for name in one_estimate), terms[one_estimate[0]][1]))
    denom = sum(v * v / d for v, d in estimates if v > 0 and d > 0)
    df = total * total / denom if denom > 0 else math.inf
    se = math.sqrt(total)
    noise = t_quantile(df, level) * se
    answer = LEVEL_ANSWER if abs(diff) <= noise else ("A higher" if diff > 0 else "B higher")
    return Verdict(diff, noise, answer, rule, se, df, {name: v for name, (v, _) in terms.items()})


def against(a: Cell, target: float, level: float = LEVEL) -> Verdict:
    """Judge mean(A) - ``target`` (a fixed number: a published score, a goal) by the same rule with one side: A's
    seed variance over its seeds plus its test term, which is not divided by the seeds (per-example: the variance
    over examples of the seed-averaged correctness, less the seeds' own flips, over N; else the binomial
    ``acc (1 - acc) / N``). Student's t on Welch-Satterthwaite df, two-sided. ``verdict``: "A higher" (the target
    is met beyond the noise), "B higher" (missed beyond it) or ``LEVEL_ANSWER``; one seed: "one seed: not
    judged" unless the cell is deterministic. The target is a population accuracy; a published score on the
    *same* test split carries no test term of its own against this one, so the rule is conservative there."""
    if not a.accs:
        return Verdict(None, None, "not run yet")
    diff = a.mean - target
    if a.seed_var is None:
        return Verdict(diff, None, "one seed: not judged")
    seeds = a.seed_var / a.k
    if a.correct is not None:
        c = a.correct
        flip = c.var(0, ddof=1).mean() / a.k if a.k > 1 and not a.deterministic else 0.0
        test, rule = max(c.mean(0).var(ddof=1) - flip, 0.0) / a.n, "paired"
    elif a.n:
        test, rule = a.mean * (1 - a.mean) / a.n, "unpaired"
    else:
        raise ValueError("a cell without predictions needs its test set's size (Cell(n=...)) to meet a target")
    return judged(diff, {"seeds_a": (seeds, a.k - 1), "test": (test, a.n - 1)}, rule, level)


def target_verdict(accs: Sequence[float], target: float, n: int) -> str:
    """How a cell of seeds (accuracies in %, scored on a test split of ``n``) stands against a target in %, judged by
    ``against``: "met by 1.85 points (within the ±2.40 noise)", "missed by 0.96 points (beyond the ±0.80
    noise)", or with one seed "met by 0.33 points (one seed: not judged)"."""
    v = against(Cell([a / 100 for a in accs], n=n), target / 100)
    diff = 100 * v.diff
    said = f"{'met' if diff >= 0 else 'missed'} by {abs(diff):.2f} points"
    if v.noise is None:
        return said + " (one seed: not judged)"
    return said + f" ({'within' if v.verdict == LEVEL_ANSWER else 'beyond'} the ±{100 * v.noise:.2f} noise)"


def test_size(run: dict) -> int | None:
    """A run's test split size: its predictions', a run directory's ``num_examples``, else its breakdown by
    depth summed (a record)."""
    if run.get("test_predictions"):
        return int(run["test_predictions"]["n"])
    if "num_examples" in run:
        return run["num_examples"]["test"]
    by_depth = run.get("test_by_depth")
    return sum(cell["n"] for cell in by_depth.values()) if by_depth else None


def cell_of(runs: Sequence[dict], n: int | None = None) -> Cell:
    """The cell of some runs (``results.json`` dicts or committed records) of one setting, one per seed: paired
    predictions when every run kept them on one test split, else the accuracies and the test split's size
    (``n`` when the runs do not say it)."""
    accs = [r["test_acc"] for r in runs]
    kept = [r.get("test_predictions") for r in runs]
    if runs and all(kept) and len({p["fingerprint"] for p in kept}) == 1 and len({p["n"] for p in kept}) == 1:
        return Cell(accs, correct=np.stack([decode_correct(p) for p in kept]), fingerprint=kept[0]["fingerprint"])
    sizes = {test_size(r) for r in runs} - {None}
    return Cell(accs, n=min(sizes) if sizes else n)


# --- the rules it replaces, kept to show in the calibration why they were replaced -------------------------------


def essay_rule_before(a: Cell, b: Cell, sigma_suite: float = 0.0) -> Verdict:
    """The rule ``studies.essay`` used up to 15303c5: noise = 2 sigma sqrt(1/k_A + 1/k_B), sigma the larger of the
    cells' pooled seed sd, the suite's and the binomial floor sqrt(0.25 / N) (divided by the seeds with them)."""
    groups = [g for g in (a.accs, b.accs) if len(g) > 1]
    dof = sum(len(g) - 1 for g in groups)
    pooled = math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in groups) / dof) if dof else 0.0
    sigma = max(pooled, sigma_suite, math.sqrt(0.25 / min(a.n, b.n)))
    diff, noise = a.mean - b.mean, 2 * sigma * math.sqrt(1 / a.k + 1 / b.k)
    answer = LEVEL_ANSWER if abs(diff) <= noise else ("A higher" if diff > 0 else "B higher")
    return Verdict(diff, noise, answer, "essay before")


def unpaired_undivided(a: Cell, b: Cell) -> Verdict:
    """The conservative rule that needs no predictions: each cell's own seed spread over its seeds, plus each
    cell's binomial test error, not divided by the seeds, at 2 standard errors."""
    var = (a.seed_var or 0.0) / a.k + (b.seed_var or 0.0) / b.k
    var += a.mean * (1 - a.mean) / a.n + b.mean * (1 - b.mean) / b.n
    diff, noise = a.mean - b.mean, 2 * math.sqrt(var)
    answer = LEVEL_ANSWER if abs(diff) <= noise else ("A higher" if diff > 0 else "B higher")
    return Verdict(diff, noise, answer, "unpaired undivided")


# --- simulation --------------------------------------------------------------------------------------------------

SIM_CENTRE, SIM_SPREAD = (
    0.3,
    2.5,
)  # logits of example difficulty: many examples always right or always wrong, as on ListOps


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def shift_for(logits: np.ndarray, effect: float) -> float:
    """The shift of every logit that raises the mean accuracy over ``logits`` by ``effect`` (Newton's method)."""
    base, shift = sigmoid(logits).mean(), 0.0
    for _ in range(50):
        p = sigmoid(logits + shift)
        gap = p.mean() - base - effect
        if abs(gap) < 1e-10:
            break
        shift -= gap / (p * (1 - p)).mean()
    return shift


def seed_shift_sd(logits: np.ndarray, spread: float) -> float:
    """The sd of a seed's shared logit shift that makes one seed's test accuracy spread ``spread`` (sd, accuracy
    units) from seed to seed on these examples, on top of the examples' own flips (whose sd it subtracts)."""
    p = sigmoid(logits)
    flips = (p * (1 - p)).sum() / len(p) ** 2  # variance of the accuracy from independent flips alone
    shared = max(spread**2 - flips, 0.0)
    return math.sqrt(shared) / (p * (1 - p)).mean()


def simulate_cell(rng: np.random.Generator, logits: np.ndarray, k: int, shift_sd: float) -> np.ndarray:
    """(k, N) correctness of k seeds of one setting: example i is right with probability
    sigmoid(logits_i + b_s), b_s ~ N(0, shift_sd^2) a seed's shift shared by all its examples (seeds better or
    worse overall), each example then drawn on its own (the seed's flips)."""
    shift = rng.normal(0.0, shift_sd, size=(k, 1))
    return rng.random((k, len(logits))) < sigmoid(logits[None, :] + shift)


def simulate_exchange_cell(rng: np.random.Generator, logits: np.ndarray, k: int, spread: float) -> np.ndarray:
    """(k, N) correctness of k seeds whose flips are *exchanges*: seed s gets exactly m_s examples right,
    m_s = round(sum_i sigmoid(logits_i + b_s)) with b_s ~ N(0, .) spreading the seed's accuracy ``spread`` (sd),
    and which m_s is drawn by ranking logits_i + logistic noise (example i's chance is about sigmoid(logits_i +
    b_s), as in ``simulate_cell``). Each example still flips from seed to seed, but one example's gain is
    another's loss, so the accuracy moves far less than independent flips would move it: what the Transformer's
    complete-graph seeds do on ListOps (graph_choice_depth, 4 - 2 tied layers: its seeds spread about 0.06
    points where independent flips alone would spread them about 0.18)."""
    p = sigmoid(logits)
    shift = rng.normal(0.0, spread / (p * (1 - p)).mean(), size=k)
    out = np.zeros((k, len(logits)), dtype=bool)
    for s in range(k):
        m = int(round(sigmoid(logits + shift[s]).sum()))
        u = rng.random(len(logits))
        score = logits + np.log(u) - np.log1p(-u)  # logistic noise
        out[s, np.argpartition(-score, m)[:m] if m < len(logits) else slice(None)] = True
    return out


def simulated_pair(
    rng: np.random.Generator, kind: str, n: int = 10_000, k: int = 3, spread: float = 0.005, effect: float = 0.0
) -> tuple[Cell, Cell]:
    """Two cells of a simulated comparison, k seeds each on one test set of n examples drawn afresh (so the
    test-sampling error is in it), whose population accuracies differ by ``effect`` (0: a null), each seed's
    accuracy spreading ``spread`` (sd) from seed to seed.

    ``kind="same"``: one config twice, only the seeds differ (every example as hard for A as for B).
    ``kind="different"``: two models of equal population accuracy whose errors fall partly on different examples
    (B's difficulty of an example correlates 0.5 with A's).
    ``kind="exchange"``: one config twice, and each seed's flips are exchanges (``simulate_exchange_cell``): the
    seeds swap which examples are right while the accuracy barely moves."""
    z = rng.normal(size=n)
    la = SIM_CENTRE + SIM_SPREAD * z
    if kind in ("same", "exchange"):
        lb = la
    elif kind == "different":
        lb = SIM_CENTRE + SIM_SPREAD * (0.5 * z + math.sqrt(0.75) * rng.normal(size=n))
    else:
        raise ValueError(f"unknown kind {kind!r}; valid: same, different, exchange")
    if effect:  # the population's shift: the same for every test set, from a large draw of the same law
        if effect not in POPULATION_SHIFT:
            POPULATION_SHIFT[effect] = shift_for(SIM_CENTRE + SIM_SPREAD * POPULATION, effect)
        la = la + POPULATION_SHIFT[effect]
    if kind == "exchange":
        ca, cb = simulate_exchange_cell(rng, la, k, spread), simulate_exchange_cell(rng, lb, k, spread)
    else:
        ca = simulate_cell(rng, la, k, seed_shift_sd(la, spread))
        cb = simulate_cell(rng, lb, k, seed_shift_sd(lb, spread))
    return tuple(Cell(c.mean(1), correct=c, fingerprint="simulated") for c in (ca, cb))


POPULATION = np.random.default_rng(12345).normal(size=400_000)
POPULATION_SHIFT: dict[float, float] = {}

RULES = {
    "tools.stats.compare": compare,
    "essay rule before": essay_rule_before,
    "unpaired, undivided": unpaired_undivided,
}


def compare_unpaired(a: Cell, b: Cell) -> Verdict:
    """``compare`` as it judges cells whose records kept no per-example predictions: its unpaired fallback."""
    return compare(
        Cell(a.accs, n=a.n, deterministic=a.deterministic), Cell(b.accs, n=b.n, deterministic=b.deterministic)
    )


FALLBACK = {"tools.stats.compare, unpaired fallback": compare_unpaired}  # calibrated on the same simulated pairs


EXCHANGE_SPREADS = (0.001, 0.003, 0.005, 0.007, 0.010)


def calibrate(
    trials: int = 1000,
    spreads: Sequence[float] = (0.003, 0.005, 0.007, 0.010),
    kinds: Sequence[str] = ("same", "different"),
    effect: float = 0.0,
    n: int = 10_000,
    k: int = 3,
    seed: int = 0,
    rules: dict | None = None,
) -> dict[tuple[str, str, float], float]:
    """The share of ``trials`` simulated comparisons each rule (``RULES`` unless given) calls a finding, by (rule,
    kind, spread): the false-alarm rate when ``effect`` is 0 (it should be near 5%), the power otherwise."""
    rules = RULES if rules is None else rules
    rng = np.random.default_rng(seed)
    counts = {(rule, kind, spread): 0 for rule in rules for kind in kinds for spread in spreads}
    for kind in kinds:
        for spread in spreads:
            for _ in range(trials):
                a, b = simulated_pair(rng, kind, n, k, spread, effect)
                for name, rule in rules.items():
                    counts[(name, kind, spread)] += rule(a, b).finding
    return {key: c / trials for key, c in counts.items()}


def calibration(trials: int = 1000) -> dict:
    """The calibration as data: ``{"trials", "rates": [{"effect", "rule", "kind", "spread", "rate"}, ...]}``, false
    alarms on nulls (effect 0: about 5% for a calibrated rule) and the power at true differences of 1 and 2 points."""
    rows = []
    for effect in (0.0, 0.01, 0.02):
        for (rule, kind, spread), rate in calibrate(trials=trials, effect=effect).items():
            rows.append({"effect": effect, "rule": rule, "kind": kind, "spread": spread, "rate": rate})
    # seeds that exchange which examples are right, down to the 0.1-point spread of real complete-graph cells
    # (appended, so the rows above keep their places: the docs cite them by index)
    for effect in (0.0, 0.01, 0.02):
        rates = calibrate(trials=trials, spreads=EXCHANGE_SPREADS, kinds=("exchange",), effect=effect, seed=1)
        for (rule, kind, spread), rate in rates.items():
            rows.append({"effect": effect, "rule": rule, "kind": kind, "spread": spread, "rate": rate})
    # the rule's unpaired fallback (cells without predictions), on the very pairs of the first rows (seed 0)
    for effect in (0.0, 0.01, 0.02):
        for (rule, kind, spread), rate in calibrate(trials=trials, effect=effect, rules=FALLBACK).items():
            rows.append({"effect": effect, "rule": rule, "kind": kind, "spread": spread, "rate": rate})
    return {"trials": trials, "rates": rows}


def markdown(data: dict) -> str:
    """``docs/results/calibration.md`` from ``calibration.json`` (``tools.replay`` draws it again)."""
    trials, rows = data["trials"], data["rates"]
    lines = [
        f"Produced by `{data.get('command', 'python -m tools.stats')}`. Share of simulated comparisons each rule calls",
        f"a finding: 10,000 test examples drawn afresh each time, 3 seeds a side, {trials:,} comparisons a cell",
        "(`tools.stats.calibrate`). Kinds: `same`, one config twice; `different`, two models of equal population",
        "accuracy whose errors fall partly on different examples; `exchange`, one config twice whose seeds swap",
        "which examples are right while the accuracy barely moves (`tools.stats.simulate_exchange_cell`; `·`: not",
        "simulated). Spread: the sd of one seed's test accuracy from seed to seed, in points.",
        "The rules: [docs/statistics.md](../statistics.md).",
    ]
    spreads = sorted({r["spread"] for r in rows})
    for effect in sorted({r["effect"] for r in rows}):
        what = (
            "No true difference: false alarms (a calibrated rule: about 5%)"
            if not effect
            else (f"A true difference of {100 * effect:.0f} point{'s' if effect > 0.01 else ''}: power")
        )
        lines += ["", f"**{what}**", ""]
        lines.append("| rule | kind | " + " | ".join(f"spread {100 * s:.1f}" for s in spreads) + " |")
        lines.append("|---|---|" + "---|" * len(spreads))
        rate = {(r["rule"], r["kind"], r["spread"]): r["rate"] for r in rows if r["effect"] == effect}
        for rule in dict.fromkeys(r["rule"] for r in rows):
            for kind in dict.fromkeys(r["kind"] for r in rows):
                if not any((rule, kind, s) in rate for s in spreads):
                    continue
                cells = " | ".join(
                    f"{100 * rate[(rule, kind, s)]:.1f}%" if (rule, kind, s) in rate else "·" for s in spreads
                )
                lines.append(f"| {rule} | {kind} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.stats [--out docs/results/calibration.md]``: the calibration table, printed, and with
    ``--out`` written as ``X.json`` and ``X.md`` (drawn from the JSON; ``tools.check_docs`` replays it)."""
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("--out", help="write X.md and X.json beside it (docs/results/calibration.md)")
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args(argv)
    data = calibration(args.trials)
    trials = f" --trials {args.trials}" if args.trials != 1000 else ""
    data["command"] = f"python -m tools.stats{trials}" + (f" --out {args.out}" if args.out else "")
    table = markdown(data)
    print(table)
    if args.out:
        out = Path(args.out)
        out.with_suffix(".json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        out.with_suffix(".md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
