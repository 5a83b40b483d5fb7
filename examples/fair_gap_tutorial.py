# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Test your fair-DP algorithm's privacy claim
#
# A fair training loop watches the **demographic-parity gap**: the difference between two groups'
# positive-prediction rates. Releasing it privately looks easy -- add Laplace noise scaled to the gap's
# sensitivity. This tutorial writes such a release with a *plausible but wrong* sensitivity claim, lets
# `dpfair_analysis.testing` catch it twice (a shrunk counterexample to the sensitivity claim, then an
# empirical lower bound on epsilon above the claim), fixes it, and shows the fix passing -- with evidence
# that the passing audit had the power to fail.
#
# The mechanisms live in `fair_gap.py` beside this notebook; `test_fair_gap.py` is the same story as a
# 19-line pytest file.

# %%
import os
import subprocess
import sys

import numpy as np
from fair_gap import DATA, claimed_sensitivity, counts, gap, gap_from_counts, private_gap_fixed, private_gap_wrong

from dpfair_analysis.testing import SensitivityViolation, assert_sensitivity, audit, find_sensitivity

# DPFAIR_PROFILE=smoke runs every search and audit at the kit's smoke budget (the tests' smoke run)
BUDGET = "smoke" if os.environ.get("DPFAIR_PROFILE") == "smoke" else "quick"
EXAMPLES = 60 if BUDGET == "smoke" else 300  # neighbouring pairs a sensitivity search tries
print("budget:", BUDGET)
DATA

# %% [markdown]
# ## The claim
#
# Privacy is stated for **one person's sensitive attribute changing** (the relation of PF-LD, paper 003):
# the kit's `attribute-change` relation. The plausible argument: *"when one person changes group, a group's
# rate moves by at most one over its size, so the gap's sensitivity is 1 / (smallest group)"*.
# `private_gap_wrong` adds Laplace noise of that scale over epsilon = 1.

# %%
print("gap:", gap(DATA), " claimed sensitivity on DATA:", claimed_sensitivity(DATA))

# %% [markdown]
# ## Step 1 -- test the sensitivity claim
#
# `assert_sensitivity` searches neighbouring pairs with hypothesis -- generated data sets with tiny and
# unequal groups, plus the worst-case families this project's searches found (a lone member of a group, a
# group at one extreme with one member at the other) -- and raises with a **shrunk** counterexample.

# %%
try:
    assert_sensitivity(gap, claimed_sensitivity, relation="attribute-change", mechanism="laplace",
                       examples=EXAMPLES)
except SensitivityViolation as error:
    violation = error
print("ratio to the claimed bound:", round(violation.ratio, 3))
print("the change:", violation.change.as_dict())
print("D  groups:", violation.data["group"], " predictions:", violation.data["y"])
print("D' groups:", violation.neighbour["group"])

# %% [markdown]
# The person who moves leaves one group **and** joins the other: both rates move. The claim only
# accounted for one of them.

# %% [markdown]
# ## Step 2 -- audit the mechanism
#
# The audit runs `private_gap_wrong(data, rng)` many times on neighbours of `DATA`, searches pairs,
# statistics and thresholds on one part of the runs, and bounds epsilon on fresh runs: the confidence
# (95%) holds over the whole search.

# %%
wrong = audit(private_gap_wrong, 1.0, relation="attribute-change", data=DATA, budget=BUDGET)
print(f"claimed epsilon 1, audited epsilon >= {wrong.epsilon_lower:.2f} (95%): consistent = {wrong.consistent}")
print("witness change:", wrong.witness["change"], " event:", wrong.witness["event"])
print(f"{wrong.trials} runs in {wrong.seconds:.1f} s")

# %% [markdown]
# The bound is far above the claim. Besides the sensitivity, the noise scale itself depends on the group
# sizes -- which are private under this relation -- so the two output distributions have different tails.

# %% [markdown]
# ## Step 3 -- fix it
#
# Release the four **counts** (positives and members of each group) with Laplace(4 / epsilon) noise, and
# compute the gap from the noisy counts (post-processing). Moving one person changes each count by at
# most one: l1 sensitivity 4 -- which the kit confirms, and `find_sensitivity` shows is attained.

# %%
assert_sensitivity(counts, 4.0, relation="attribute-change", norm=1, examples=EXAMPLES)
worst = find_sensitivity(counts, relation="attribute-change", norm=1, examples=EXAMPLES)
print("largest l1 change found:", worst.sensitivity, " by", worst.change.as_dict())

# %%
fixed = audit(private_gap_fixed, 1.0, relation="attribute-change", data=DATA, budget=BUDGET, twin=0.25)
print(f"claimed epsilon 1, audited epsilon >= {fixed.epsilon_lower:.2f}: consistent = {fixed.consistent}")
print(f"under-noised twin (a quarter of the noise, true epsilon 4): audited >= "
      f"{fixed.power['twin_epsilon_lower']:.2f}, caught = {fixed.power['twin_caught']}")
noisy = private_gap_fixed(DATA, np.random.default_rng(0))
print("one release: noisy counts", np.round(noisy, 2), "-> gap", round(gap_from_counts(noisy), 3))
print("(with eight people the noise swamps the counts: the guarantee is about the release, its usefulness "
      "comes with larger groups)")

# %% [markdown]
# A pass alone proves little; the twin shows that this audit, at this budget, *would* have caught a
# violation four times the claim.
#
# ## Step 4 -- the same from the command line
#
# `dpfair audit --target FILE.py:FUNCTION` imports the file you name (and only that one) and audits the
# function. `fair_gap_data.csv` holds `DATA` (a header row makes it a dict of columns).

# %%
for function in ("private_gap_wrong", "private_gap_fixed"):
    command = [sys.executable, "-m", "dpfair_analysis.cli", "audit", "--target", f"fair_gap.py:{function}",
               "--epsilon", "1", "--relation", "attribute-change", "--data", "fair_gap_data.csv", "--json"]
    if BUDGET == "smoke":
        command += ["--trials", "2000"]
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    print(function, "exit status", out.returncode)
    print(out.stdout if out.stdout else out.stderr)

# %% [markdown]
# Exit status 1 means the claim is refuted; 4 that the audit could not have refuted it (no power); 0 that it is
# consistent with it.
#
# ## Step 5 -- keep it tested
#
# `test_fair_gap.py` states both claims with `@pytest.mark.dp(epsilon=..., relation=...)` and the `dp`
# fixture; `pytest examples/` runs them (`--dp-budget full` to search harder) and writes a JSON report.

# %%
with open("test_fair_gap.py") as source:
    print(source.read())
