"""The method registry: a method added from outside the package (here, from this test file) runs everywhere the
shipped ones do -- the comparison, its command line and flags, the policy shortcut -- with nothing else edited.

The toy method is DP-SGD at a shrunk bound, ``C * shrink``: simple enough that every expectation below follows
from DP-SGD's own numbers (same noise multiplier, same steps, so the same epsilon; the noise std scales with the
bound)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
import torch

from dpfair_analysis.experiments.compare import CompareConfig, run_compare
from dpfair_analysis.training import methods
from dpfair_analysis.training.loop import TrainConfig
from dpfair_analysis.training.policies import make_policy
from dpfair_analysis.validation import check_fraction


@dataclass(frozen=True)
class ShrinkOptions:
    shrink: float = field(default=0.5, metadata={"flag": "--toy-shrink", "type": float,
                                                 "help": "the bound as a fraction of --clip (default 0.5)"})

    def __post_init__(self) -> None:
        check_fraction(self.shrink, "shrink")


def _policy(options: ShrinkOptions, context):
    from dpfair_analysis.training.clipping import UniformClipping

    return UniformClipping(context.clip_bound * options.shrink, context.noise_multiplier)


def _diagnosis(options: ShrinkOptions, norms, group, view):
    """What the diagnosis sees: DP-SGD's step at the bound C * shrink."""
    from dataclasses import replace

    dpsgd = methods.get("dpsgd")
    return dpsgd.diagnosis(dpsgd.options(), norms, group, replace(view, clip_bound=view.clip_bound * options.shrink))


TOY = methods.Method(name="toy", label="Toy", summary="DP-SGD at the bound C * shrink (a test's method)",
                     options=ShrinkOptions, policy=_policy, diagnosis=_diagnosis,
                     canary=lambda record, clip, *, group: (clip * ShrinkOptions().shrink, 1.0))


@pytest.fixture
def toy():
    methods.register(TOY)
    yield TOY
    methods.unregister("toy")


def _config(**changes) -> CompareConfig:
    return CompareConfig(dataset="synthetic", methods=("sgd", "dpsgd", "toy"), clip_bound=0.5,
                         train=TrainConfig(epochs=1, batch_size=64, lr=0.1, delta=1e-5), **changes)


def test_a_registered_method_runs_in_the_comparison(toy):
    result = run_compare(_config(method_options={"toy": ShrinkOptions(shrink=0.25)}), progress=False)
    assert set(result.table["method"]) == {"sgd", "dpsgd", "toy"}
    # same sigma, same sampling, same steps: the toy spends exactly DP-SGD's epsilon
    assert result.epsilon["toy"] == pytest.approx(result.epsilon["dpsgd"], rel=1e-12)
    noise = result.steps.groupby("method")["noise_std"].unique()
    assert list(noise["toy"]) == [0.125] and list(noise["dpsgd"]) == [0.5]  # sigma C at C = 0.5 x 0.25
    assert result.to_json()["settings"]["method_options"]["toy"] == {"shrink": 0.25}


def test_its_flag_reaches_the_command_line_and_its_checks_name_the_flag(toy, cli):
    code, out, err = cli("compare", "--data", "synthetic", "--methods", "sgd,toy", "--toy-shrink", "0.2",
                         "--epochs", "1", "--batch-size", "64", "--json", "--quiet", "--no-cache")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["settings"]["method_options"]["toy"] == {"shrink": 0.2}
    assert "toy" in payload["epsilon"]
    code, out, err = cli("compare", "--data", "synthetic", "--methods", "toy", "--toy-shrink", "1.5", "--quiet")
    assert code == 2 and out == ""
    assert err.startswith("dpfair: error: --toy-shrink:") and "shrink" in err and len(err.splitlines()) == 1


def test_help_lists_the_method_and_its_flag(toy, cli, capsys):
    with pytest.raises(SystemExit) as stop:
        cli("compare", "--help")
    out = capsys.readouterr().out
    assert stop.value.code == 0
    assert "toy" in out and "--toy-shrink" in out and "Toy: the bound as a fraction" in " ".join(out.split())


def test_policy_shortcut_and_unknown_names(toy):
    policy = make_policy("toy", clip_bound=2.0, noise_multiplier=1.0, shrink=0.5)
    assert policy.clip_bound == 1.0
    with pytest.raises(TypeError, match="shrink|unexpected"):
        make_policy("dpsgd", clip_bound=1.0, noise_multiplier=1.0, shrink=0.5)
    with pytest.raises(ValueError, match="method must be one of"):
        methods.get("toys")


def test_registration_refuses_a_taken_name_and_bad_definitions(toy):
    with pytest.raises(ValueError, match="registered already"):
        methods.register(methods.Method(name="toy", label="Other", summary="", policy=_policy))
    with pytest.raises(ValueError, match="registered already"):  # the one rule: even the same entry again
        methods.register(TOY)
    assert methods.get("toy") is TOY
    with pytest.raises(ValueError, match="lowercase letters"):
        methods.Method(name="Toy2", label="", summary="", policy=_policy)
    with pytest.raises(ValueError, match="exactly one of policy and trainer"):
        methods.Method(name="neither", label="", summary="")
    with pytest.raises(TypeError, match="frozen dataclass"):
        methods.Method(name="loose", label="", summary="", options=dict, policy=_policy)


def test_an_error_is_mapped_to_the_flag_of_the_field_it_names_exactly():
    """``clients_per_round`` starts with ``clients``: the message names the longer field and its flag."""
    assert methods.flag_of("dpfedavg", "clients_per_round=5 exceeds clients=3") == "--clients-per-round"
    assert methods.flag_of("dpfedavg", "clients=5000 exceeds the 100 training rows") == "--clients"
    assert methods.flag_of("dpfedavg", "something else") is None


def test_shipped_flags_are_one_per_name_and_shared_flags_set_every_method():
    flags = {flag.flag: flag for flag in methods.option_flags()}
    assert len(flags) == len(methods.option_flags())
    shared = flags["--count-noise-ratio"]
    assert {m for m, _ in shared.targets} == {"naive", "dpsgdf", "fairdp"}
    options = methods.options_from_flags({"--count-noise-ratio": 4.0, "--clients": 50})
    assert options["naive"].count_noise_ratio == options["dpsgdf"].count_noise_ratio == 4.0
    assert options["fairdp"].count_noise_ratio == 4.0 and options["dpfedavg"].clients == 50
    assert set(options) == {"naive", "dpsgdf", "fairdp", "dpfedavg"}


def test_a_refused_trainer_setting_names_its_flag(cli):
    code, _, err = cli("compare", "--data", "synthetic", "--methods", "dpfedavg", "--clients", "100000", "--quiet")
    assert code == 2 and err.startswith("dpfair: error: --clients:") and "training rows" in err


def test_the_diagnosis_plans_it_and_sees_its_step_through_its_view(toy, cli):
    """``diagnose --method toy`` runs end to end, and the predictor's coefficients are DP-SGD's at C * shrink:
    bounds C/2, c_i = min(1, (C/2) / ||g_i||), noise std sigma C / 2."""
    from types import SimpleNamespace

    from dpfair_analysis.diagnose.mechanisms import Mechanism

    norms = torch.tensor([0.1, 0.3, 1.0, 4.0], dtype=torch.float64)
    problem = SimpleNamespace(train_sizes=torch.tensor([2.0, 2.0], dtype=torch.float64), n=4, P=3)
    bounds, coefficients, noise_std = Mechanism("toy", clip_bound=0.5, sigma=2.0).coefficients(
        norms, torch.tensor([0, 0, 1, 1]), problem)
    assert torch.equal(bounds, torch.full((4,), 0.25, dtype=torch.float64))
    assert torch.allclose(coefficients, torch.tensor([1.0, 0.25 / 0.3, 0.25, 0.0625], dtype=torch.float64))
    assert noise_std == pytest.approx(0.5)
    runs = {}
    for method, clip in (("toy", "0.5"), ("dpsgd", "0.25")):  # the same step: bound 0.25, noise sigma x 0.25
        code, out, err = cli("diagnose", "--data", "synthetic", "--method", method, "--clip", clip, "--split-mode",
                             "per-split", "--epochs", "2", "--json", "--no-recommendations")
        assert code == 0, err
        runs[method] = json.loads(out)
    assert runs["toy"]["settings"]["method"] == "toy" and len(runs["toy"]["groups"]) >= 2
    for toy_group, dpsgd_group in zip(runs["toy"]["groups"], runs["dpsgd"]["groups"]):
        assert toy_group["predicted_cost"] == pytest.approx(dpsgd_group["predicted_cost"], abs=1e-12)
        assert toy_group["predicted_cost_low"] <= toy_group["predicted_cost"] <= toy_group["predicted_cost_high"]


def test_the_sampled_audit_runs_it_as_it_ships(toy, cli):
    """``audit --sampled --mechanism toy``: the method's own policy in ``train``, its canary rule from the
    registry; consistent with its claim (its under-noised twin is listed beside it)."""
    code, out, err = cli("audit", "--sampled", "--mechanism", "toy", "--trials", "16", "--json", "--quiet")
    assert code == 0, err
    (row,) = json.loads(out)["results"]
    assert row["mechanism"] == "toy" and row["consistent"] and not row["control"]
    assert row["steps"] > 1 and 0 < row["sampling_rate"] < 1
    from dpfair_analysis.verify.audits.trainers import sampled_audits

    assert sampled_audits()["toy@0.25"].control
