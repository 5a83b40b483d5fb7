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
# # Verifying the papers' claims and auditing the private mechanisms
#
# Every checkable statement of the five papers (000-004 (README, References)) is an entry of `dpfair_analysis.verify.claims`, its quote as printed beside its check; the check runs the toolkit's own searches, Monte Carlo and exact comparisons and returns *holds* (search effort, worst ratio), *violated* (false as stated, in the stated regime: a counterexample at parameters the algorithm reaches and the factor by which it breaks the claim), *misprinted* (false as printed, true after the named typo fix, a fix that does not change what is guaranteed; both forms tested) or *inconclusive*. A fix that changes the guarantee makes the printed statement *violated*, with its fixed form registered as a corrected claim. A claim whose check holds while a premise its proof uses (`rests_on`) is violated has the standing *holds, but rests on violated premises*, counted apart from a plain *holds*; where the paper's words admit another reading than the one a check takes, that reading is run beside the verdict with the number it gives. The same runs as `dpfair verify`; `dpfair verify --explain ID` shows one claim in full.
#
# `DPFAIR_PROFILE=quick` uses the quick budget and small audit trial counts; `smoke` (the test suite's) the same on the claims of papers 002 and 004 and the four mechanisms whose audits take a fraction of a second (every claim's verdict and every mechanism's audit are tested in `tests/verify/`); `full` the full budget and each audit's default trials.

# %%
import pandas as pd

from dpfair_analysis import plotting
from dpfair_analysis.experiments.notebook import notebook_environment
from dpfair_analysis.plotting import save_figure
from dpfair_analysis.verify.audits import MECHANISMS, audit, audit_table
from dpfair_analysis.verify.claims import CLAIMS, explain, format_explanation, run_claims, verdict_table

ENV = notebook_environment('verify')  # DPFAIR_PROFILE, DPFAIR_FIGS, DPFAIR_THREADS
PROFILE, FIGS = ENV.profile, ENV.figs
BUDGET = ENV.settings  # the smoke profile checks at the quick budget
# smoke: two papers' claims (every verdict but "holds, but rests on violated premises") and the fast audits
CHECKED = [c for c in CLAIMS if c.paper in ('002', '004')] if ENV.smoke else CLAIMS
AUDITED = ('dpsgd', 'naive', 'dpsgdf', 'output-perturbation') if ENV.smoke else tuple(MECHANISMS)
pd.set_option('display.width', 220)
pd.set_option('display.max_colwidth', 90)
PROFILE, BUDGET

# %% [markdown]
# ## Verdicts

# %%
results = run_claims(CHECKED, BUDGET, progress=False)
table = verdict_table(results)
plotting.save_table(table, FIGS / 'verdicts.csv')
print(table.standing.value_counts().to_string())
table[['id', 'standing', 'key_number', 'key']]

# %% [markdown]
# ## Verdicts by paper and kind
# *printed* claims are the papers' statements tested as printed (their quotes are in the registry); *corrected* and
# *extension* claims are the toolkit's corrected forms and tests beyond a statement's regime.

# %%
pd.crosstab([table.paper, table.kind], table.standing, margins=True)

# %% [markdown]
# ## Holds, but rests on violated premises
# The claim's own check holds, but a claim its proof uses is violated (the standing is derived from the premises' verdicts).

# %%
for _, row in table[table.standing != table.verdict].iterrows():
    print(f"{row.id} ({row.key_number}): {row.key}\n    rests on {row.rests_on}")

# %% [markdown]
# ## Other readings, beside the verdicts that do not take them

# %%
for _, row in table[table.alternative_readings != ''].iterrows():
    print(f"{row.id}: {row.verdict} {row.key_number}, read as {row.reading}\n    other reading {row.alternative_readings}")

# %% [markdown]
# ## Misprinted: false as printed, true after the named fix (both forms tested)

# %%
mis = table[table.verdict == 'misprinted']
for _, row in mis.iterrows():
    print(f"{row.id} ({row.key_number}): fix {row.fix}")

# %% [markdown]
# ## Violated: false as stated, in the stated regime (counterexamples at parameters the algorithms reach)

# %%
bad = table[table.verdict == 'violated']
for _, row in bad.iterrows():
    print(f"{row.id} [{row.kind}] ({row.key_number}): {row.key}")

# %% [markdown]
# ## Corrected forms and extensions (registered beside the printed claims)

# %%
table[table.kind != 'printed'][['id', 'kind', 'corrects', 'extends', 'verdict', 'key']]

# %% [markdown]
# ## One claim in full (`dpfair verify --explain 003.thm3`)

# %%
print(format_explanation(explain('003.thm3', BUDGET)))

# %% [markdown]
# ## Privacy audits (`dpfair_analysis.verify.audits`)
# Each registered mechanism on its worst-case neighbouring pair, and its under-noised twin (noise × 0.25, same claim), which the audit must catch (a bound above the claim).

# %%
TRIALS = 100 if ENV.quick else None  # full: each mechanism's default_trials
audits = []
for name in AUDITED:
    for fraction in (1.0, 0.25):
        audits.append(audit(name, trials=TRIALS, noise_fraction=fraction, seed=0))
audited = audit_table(audits)
audited[['mechanism', 'noise_fraction', 'epsilon_claimed', 'epsilon_lower', 'trials', 'consistent']]

# %%
fig = plotting.plot_audit_epsilon(audited, names=list(AUDITED))
save_figure(fig, FIGS / 'audit_epsilon.png', data=audited);

# %%
fig = plotting.plot_verdicts_by_paper(table)
save_figure(fig, FIGS / 'verdicts_by_paper.png', data=table.drop(columns=['statement']));
