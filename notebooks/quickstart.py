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
# # dpfair_analysis quick start
#
# Who pays for differential privacy? We train logistic regression on Adult (sex groups) without privacy (SGD) and with DP-SGD at the settings of Xu, Du & Wu (KDD'21, paper 000, §6.1): b = 256, 20 epochs, σ = 1, C = 0.5, δ = 1e-6, r = 1/√T, L2 weight 0.01. The cost of privacy of group k is Δ^k = acc_k(DP-SGD) − acc_k(SGD) on the test set.
#
# Set `DPFAIR_PROFILE=quick` for a fast run (2 epochs, 1 seed); the default `full` profile uses the paper's 20 epochs and 3 seeds.

# %%
from dpfair_analysis.experiments.notebook import notebook_environment

ENV = notebook_environment('quickstart')  # DPFAIR_PROFILE, DPFAIR_FIGS, DPFAIR_THREADS
PROFILE, FIGS = ENV.settings, ENV.figs
EPOCHS, SEEDS = (2, (0,)) if PROFILE == 'quick' else (20, (0, 1, 2))
ENV.profile, EPOCHS, SEEDS

# %% [markdown]
# ## The data
# The real UCI files (train + test, rows with missing values dropped).

# %%
from dpfair_analysis import data

adult = data.load('adult')
print(len(adult), 'rows,', adult.n_features, 'features')
adult.describe()

# %% [markdown]
# ## SGD vs DP-SGD, per group (paper 000, Table 1)

# %%
from dpfair_analysis.experiments.compare import CompareConfig, format_table, run_compare
from dpfair_analysis.training.loop import TrainConfig

config = CompareConfig(dataset='adult', methods=('sgd', 'dpsgd'), seeds=SEEDS,
                       train=TrainConfig(epochs=EPOCHS, batch_size=256, delta=1e-6))
result = run_compare(config, progress=False)
print(format_table(result))
result.epsilon

# %% [markdown]
# Paper 000 reports, for DP-SGD vs SGD on Adult: total −0.0592, men −0.0740, women −0.0281 (ε = 3.1 with the classic RDP conversion; the toolkit's default conversion gives a smaller ε for the same run).

# %%
import matplotlib.pyplot as plt

from dpfair_analysis.plotting import plot_group_history, save_figure

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
plot_group_history(result.histories, metric='accuracy', split='test', ax=axes[0])
plot_group_history(result.histories, metric='grad_norm', split='batches', ax=axes[1])
axes[1].set_yscale('log')
curves = result.histories.query("metric in ['accuracy', 'grad_norm']")
save_figure(fig, FIGS / 'adult_group_curves.png', data=curves);

# %% [markdown]
# ## What the privacy costs: ε three ways
# The papers' tool used RDP with the classic conversion over a fixed order list; dp_accounting's current conversion and PLD accounting are tighter.

# %%
import pandas as pd

from dpfair_analysis.privacy.accounting import AccountingSpec, dpsgd_privacy_summary

n_train = int(0.8 * len(adult))
rows = [dpsgd_privacy_summary(n=n_train, batch_size=256, noise_multiplier=1.0, delta=1e-6, epochs=20,
                              accounting=AccountingSpec(accountant=a, conversion=c))
        for a, c in [('rdp', 'classic'), ('rdp', 'improved'), ('pld', 'improved')]]
pd.DataFrame(rows)[['accountant', 'conversion', 'steps', 'sampling_rate', 'epsilon']]
