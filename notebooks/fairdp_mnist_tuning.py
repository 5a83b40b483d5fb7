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
# # Unbalanced full MNIST under the reproduction protocol — papers 000 and 002, every method tuned on the same budget
#
# Papers 000 and 002 print r = 0.01 for the MNIST CNN and nothing about how batches are drawn; the toolkit's runs at the printed settings (Poisson sampling, which DP-SGD's accountant assumes) lose 1.6-5× the printed accuracy (`dpsgdf.ipynb`), and `fairdp_mnist_figures.ipynb`'s Figure 4 showed the learning rate alone moving DP-SGD's class 8 from 0.002 to 0.618 — read on the test images, so it cannot choose a setting. This notebook gives every method the same fair chance before a verdict (`dpfair_analysis.experiments.tuning`):
#
# * **Budget** (`mnist_tuning.MNIST_GRID`): learning rate ∈ {0.01 (printed), 0.05, 0.1} × batch sampling ∈ {Poisson, shuffled fixed-size batches} = 6 configurations for each of SGD, DPSGD, Naive, DPSGD-F, Opt-Q and FairDP (36 runs of 60 epochs), and of the later mitigations DPSGD-Global-Adapt and bounded adaptive clipping (12 more; issue 51), everything else at paper 000's settings (b = 256, σ = 0.8, C = 1, δ = 1e-6, equal privacy); Global-Adapt at its authors' MNIST options (`mnist_tuning.GLOBAL_ADAPT_MNIST`: threshold τ = 0.7, Z₀ = 50, η_Z = 0.1, σ_b = 10; their Adult and Dutch scripts use τ = 1).
# * **Validation rows carved from the training images, never the test images** (`validation_split`): 10% of the official 60,000 training images, stratified by class, held out *before* class 8 is cut (so they have the test set's natural class mix; their 585 images of class 8 are images the cut to 500 discards anyway). Every run trains on the other 49,235 images — class 8 keeps exactly its 500 — and is evaluated on the validation images and on the official 10,000 test images.
# * **Selection**: each method's configuration with the highest overall validation accuracy (ties to the printed one). The test accuracy of that run is the tuned result; the printed configuration's run (same training images) is the result at the printed settings. No refit: the chosen run is the released model.
# * **Accounting for the tuning: not private.** The choice reads the validation images' accuracy without noise over a fixed grid; each result states the ε of its own training run only (`SELECTION_PRIVACY`). Shuffled batches are not what the Poisson accountant assumes: their ε (the same number) is not a guarantee (`sampling_matches_accounting = False`).
# * **Verdicts** (three-valued): *reproduces at the printed settings* / *reproduces after tuning* / *does not reproduce within the budget*, per cell of paper 000's Table 1 (a cost no worse than printed by more than 0.03 on the total and class 2, 0.07 on class 8 — 3× and 2× our seed-to-seed sd) and per qualitative claim.
#
# **Runs are recorded as they finish** in `paper_figs/fairdp/mnist_tuning_runs.json` (`RunRecords`: each run's validation and test accuracy per class, its ε and sampling) by `notebooks/record_runs.py --study mnist-tuning`, one run at a time (~25 CPU-minutes each; 60-90 min of wall time on this shared machine). **At the full profile this notebook trains nothing**: it reads the runs recorded so far, says how much of each method's budget they cover, and draws verdicts only for methods whose budget is complete (a choice over part of the budget is not the protocol's); the sampling comparison uses every learning rate at which both samplings are recorded. `DPFAIR_PROFILE=quick` runs a smoke copy (SGD, DPSGD, DPSGD-F and FairDP at lr 0.01 with both samplings, 1 epoch on the offline 5,000-image subset) **whose numbers say nothing about the papers' claims**.

# %%
import pandas as pd
from IPython.display import Image, display

from dpfair_analysis.experiments import mnist_tuning, tuning
from dpfair_analysis.verify import reproduction
from dpfair_analysis.experiments.cache import RunCache, RunRecords, default_cache_dir
from dpfair_analysis.experiments.dpsgdf import PAPER_TABLE1
from dpfair_analysis.experiments.notebook import notebook_environment
from dpfair_analysis.plotting import plot_tuning_grid, save_figure, save_table

ENV = notebook_environment('fairdp')  # DPFAIR_PROFILE, DPFAIR_FIGS, DPFAIR_THREADS; beside the MNIST figures' records
PROFILE, FIGS, QUICK = ENV.settings, ENV.figs, ENV.quick
CACHE = RunCache(default_cache_dir())
RECORDS = RunRecords(FIGS / 'mnist_tuning_runs.json')
BASE = mnist_tuning.mnist_tuning_base(PROFILE)
# quick: four methods on the first two configurations (lr 0.01 with Poisson and with shuffled batches)
METHODS = ('sgd', 'dpsgd', 'dpsgdf', 'fairdp') if QUICK else mnist_tuning.MNIST_TUNING_METHODS
GRID = mnist_tuning.MNIST_GRID.head(2) if QUICK else mnist_tuning.MNIST_GRID
GROUPS = mnist_tuning.MNIST_GROUPS
pd.set_option('display.width', 220)
pd.set_option('display.max_columns', 30)
print(GRID.budget())
print(tuning.SELECTION_PRIVACY)
ENV.profile

# %% [markdown]
# ## The runs
# Every (method, configuration): overall, class-2 and class-8 accuracy on the validation and the test images, its ε and whether its sampling is what the accountant assumes.

# %%
rows = tuning.recorded_tuning_runs(BASE, methods=METHODS, grid=GRID, cache=CACHE, records=RECORDS,
                                   compute_missing=QUICK, progress=True)
status = tuning.budget_status(rows, GRID, METHODS)
COMPLETE = tuple(status.loc[status['complete'], 'method'])
print(f"{len(rows.drop_duplicates(['method', 'configuration_index']))} of {len(GRID) * len(METHODS)} runs recorded; "
      f"complete budgets: {', '.join(COMPLETE) or 'none yet'}")
display(status)
save_table(rows, FIGS / 'mnist_tuning_runs.csv')
runs = rows[rows['group'].isin(GROUPS)].pivot_table(
    index=['method', 'configuration'], columns=['split', 'group'], values='accuracy', sort=False)
runs.round(3)

# %%
if len(rows):
    complete_rows = rows[rows['method'].isin(COMPLETE)]
    chosen = tuning.printed_and_tuned(complete_rows, groups=GROUPS).query("which == 'tuned'") if COMPLETE else None
    fig = plot_tuning_grid(rows, groups=GROUPS, chosen=chosen)
    save_figure(fig, FIGS / 'mnist_tuning_grid.png', data=rows[rows['group'].isin(GROUPS)])
    display(Image(filename=str(FIGS / 'mnist_tuning_grid.png')))

# %% [markdown]
# ## The choice of each method, and the printed configuration beside it
# `val_*`: the validation accuracy the choice reads; `all`, `2`, `8`: test accuracy.

# %%
complete_rows = rows[rows['method'].isin(COMPLETE)]
selection = tuning.printed_and_tuned(complete_rows, groups=GROUPS) if COMPLETE else pd.DataFrame()
save_table(selection, FIGS / 'mnist_tuning_selection.csv')
selection.round(3)

# %% [markdown]
# ## Paper 000 Table 1 (MNIST) under the protocol
# Costs against SGD (printed configuration against SGD's printed one, tuned against SGD's tuned one), each cell beside the printed number with its margin and verdict.

# %%
paper_mnist = PAPER_TABLE1[PAPER_TABLE1['dataset'] == 'mnist'].rename(columns={'majority': '2', 'minority': '8'})
if 'sgd' in COMPLETE:  # every cost is against SGD's run on the same budget
    costs = tuning.costs_of_privacy(selection, groups=GROUPS)
    table1 = reproduction.mnist_table1_verdicts(costs, paper_mnist[['method', 'all', '2', '8']])
else:
    table1 = pd.DataFrame(columns=['method', 'group', 'printed', 'at_printed', 'tuned', 'margin', 'verdict', 'note'])
    print("SGD's budget is not complete yet: no costs, no Table 1 verdicts")
save_table(table1, FIGS / 'mnist_tuning_table1_verdicts.csv')
table1[['method', 'group', 'printed', 'at_printed', 'tuned', 'margin', 'verdict', 'note']].round(3)

# %%
print(reproduction.verdict_counts(table1['verdict']))
reproduction.row_verdicts(table1, ['method']) if len(table1) else table1

# %% [markdown]
# ## The batch-sampling hypothesis
# The hypothesis written down when the printed-settings runs came out worse than printed: the papers' code drew shuffled fixed-size batches, not the Poisson batches the accountant assumes. Shuffled minus Poisson, per method and learning rate, on the test and the validation images.

# %%
effect = tuning.sampling_effect(rows, groups=GROUPS)
save_table(effect, FIGS / 'mnist_sampling_effect.csv')
shown = ['method', 'lr', 'split', 'diff_all', 'diff_2', 'diff_8', 'poisson_all', 'shuffle_all']
effect[shown].round(3) if len(effect) else 'no learning rate has both samplings recorded yet'

# %% [markdown]
# ## The papers' claims at the printed and at the tuned configurations
# Paper 000: DPSGD hurts class 8 (its class-8 cost exceeds class 2's by more than τ = 0.05), Naive and DPSGD-F equalise (|Δ² − Δ⁸| ≤ τ), DPSGD-F has the least total loss of the three. Paper 002 (FairDP among DPSGD, Opt-Q, DPSGD-F and FairDP; one seed): least loss, SGD-like inequality, fairest private method (`verify.reproduction.claim_verdicts`).

# %%
claims = reproduction.mnist_claims(complete_rows) if 'sgd' in COMPLETE else pd.DataFrame(
    columns=['claim', 'holds_printed', 'detail_printed', 'holds_tuned', 'detail_tuned', 'verdict'])
save_table(claims, FIGS / 'mnist_tuning_claims.csv')
claims

# %% [markdown]
# ## Later work on this grid: Zhao et al.'s worst-class claims
# Bounded adaptive clipping against constant clipping (DPSGD) and unbounded adaptive clipping (Opt-Q), Global-Adapt beside them, on the CNN setting nearest to Zhao et al.'s skewed MNIST (`mnist_tuning.LATER_SETTING_NOTE`): the printed configuration's and the chosen configuration's test worst-class accuracy, the choice read on the validation images' worst class (as in the equal-ε method grid, not the overall accuracy the sections above choose by). A claim is judged once both its methods' budgets are complete.

# %%
later_worst, later_verdicts = reproduction.mnist_later_claims(rows, COMPLETE)
missing = [m for m in mnist_tuning.LATER_METHODS if m not in COMPLETE]
print(f"budgets complete: {', '.join(m for m in mnist_tuning.LATER_METHODS if m in COMPLETE) or 'none'}; "
      f"not yet: {', '.join(missing) or 'none'}")
save_table(later_verdicts, FIGS / 'mnist_tuning_later_claims.csv')
display(later_worst.round(3) if len(later_worst) else 'no later-work method has a complete budget yet')
later_verdicts[['claim', 'printed_gain', 'gain_at_defaults', 'gain_after_tuning', 'verdict']].round(3) \
    if len(later_verdicts) else 'no claim has both its methods complete yet'

# %% [markdown]
# ## Every method at equal ε, chosen on the validation images' worst class
# The comparison of issue 51 on this setting (paper 000's unbalanced class 8, a CNN, δ = 1e-6, equal privacy): each method whose budget is complete, its printed configuration's and its chosen configuration's test worst class (class 8 for every private method here), the gap between its best and worst class, its overall accuracy, and how far its worst class moves over its own 6 configurations (`range`: Demelius et al.'s robustness question). One seed, paper 000's. A configuration with shuffled batches states an ε its sampling does not have (above).

# %%
equal_eps = reproduction.mnist_equal_epsilon(rows, COMPLETE)
save_table(equal_eps, FIGS / 'mnist_tuning_equal_epsilon.csv')
equal_eps.round(3) if len(equal_eps) else 'no private method has a complete budget yet'

# %% [markdown]
# ## Findings
# Generated from the tables above (`reproduction.mnist_findings`).

# %%
print(reproduction.mnist_findings(status, table1, claims, later_verdicts, equal_eps))

# %% [markdown]
# ## Full profile
# ```
# notebooks/record_runs.py --study mnist-tuning --jobs 1     # resumable: records each run as it finishes
# .venv/bin/python notebooks/execute.py fairdp_mnist_tuning --profile full --in-place
# ```
