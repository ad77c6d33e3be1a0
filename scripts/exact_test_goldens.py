#!/usr/bin/env python3
"""Writes Fixtures/statistics/exact_tests.json: scipy's answers for the exact tests and the
Wilson intervals agent-eval computes (EvalEngine/Statistics/PassRateTest.swift).

Run once, when the table of inputs changes, and commit the output; the tests only read it:
    python3 scripts/exact_test_goldens.py > Fixtures/statistics/exact_tests.json
Needs scipy (Debian: python3-scipy; PyPI: scipy)."""
import json
import sys

import scipy
from scipy.stats import barnard_exact, binomtest, fisher_exact

# (baseline passes, baseline attempts, current passes, current attempts)
TABLES = [
    (5, 5, 0, 5), (5, 5, 3, 5), (10, 10, 7, 10), (10, 10, 9, 10), (9, 10, 4, 10),
    (20, 20, 15, 20), (18, 20, 10, 20), (1, 1, 0, 1), (3, 3, 0, 3), (7, 10, 7, 10),
    (2, 10, 8, 10), (30, 30, 25, 30), (12, 30, 5, 30), (8, 8, 6, 12), (4, 6, 0, 2),
    (25, 25, 0, 1), (25, 25, 19, 25), (0, 5, 0, 5), (5, 5, 5, 5), (15, 16, 9, 14),
    (6, 7, 2, 9), (20, 20, 17, 20), (11, 12, 3, 4), (1, 3, 0, 3), (29, 30, 24, 30),
]


def main():
    rows = []
    for bp, bn, cp, cn in TABLES:
        table = [[bp, cp], [bn - bp, cn - cp]]
        fisher = fisher_exact(table, alternative="greater").pvalue
        barnard = barnard_exact(table, alternative="greater", pooled=True).pvalue
        rows.append({
            "baseline": [bp, bn], "current": [cp, cn],
            "fisher": float(fisher), "barnard": float(barnard),
        })
    intervals = []
    for k, n in [(0, 1), (1, 1), (0, 5), (3, 5), (5, 5), (7, 10), (19, 20), (1, 30), (50, 100)]:
        for confidence in (0.95, 0.9):
            ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
            intervals.append({"passes": k, "attempts": n, "confidence": confidence,
                              "lower": float(ci.low), "upper": float(ci.high)})
    json.dump({"scipy": scipy.__version__, "tables": rows, "wilson": intervals}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
