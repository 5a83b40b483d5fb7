"""Every call of the code under test sees the user's data unchanged: numpy data arrives as a read-only view (a
write raises and is refused as a broken mechanism, naming the write), dict data as a fresh dict of read-only
views, in every entry point -- audit (given pairs, the search, worker processes), assert_private,
assert_sensitivity, audit_step, the CLI's --target and the pytest plugin.

Each test failed before the change: the kit handed the same array to every call, so a mechanism that clipped its
input in place (after summing it unclipped) was audited on already-clipped data from its second call on and passed
(status 0, a witness pair the user never gave); the same bug on a copy is refuted at epsilon >= 7."""

import json
import textwrap

import numpy as np
import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.testing import assert_private, assert_sensitivity, audit, audit_step
from dpfair_analysis.testing.auditing import Budget
from dpfair_analysis.testing.runner import MechanismError, Runner

pytest_plugins = ["pytester"]

SMALL = Budget("test", screen=200, select=1_000, evaluate=2_000, top=2, max_pairs=4, batch_factors=(1, 1, 1))
WRITES = "writes to its input data"


def clip_in_place(data, rng):
    """Sums the records BEFORE clipping them (the bug), clipping in place: under add-remove with a record of 10
    added, the unclipped sum moves by 10, not 1."""
    total = float(data.sum())
    np.clip(data, -1.0, 1.0, out=data)
    return total + rng.laplace(0.0, 1.0)


def far_pair():
    base = np.linspace(-1.0, 1.0, 8)
    return base, np.append(base, 10.0)


def test_a_mechanism_that_writes_to_its_data_is_refused_and_the_pair_is_unchanged():
    pair = far_pair()
    kept = [p.copy() for p in pair]
    with pytest.raises(MechanismError, match=WRITES):
        audit(clip_in_place, 1.0, relation="add-remove", pairs=pair, budget=SMALL)
    assert all(np.array_equal(a, b) for a, b in zip(pair, kept))  # before: the 10.0 of D' had become 1.0
    with pytest.raises(MechanismError, match=WRITES):
        assert_private(clip_in_place, 1.0, relation="add-remove", pairs=pair, budget=SMALL)
    with pytest.raises(MechanismError, match=WRITES):  # the search's own pairs
        audit(clip_in_place, 1.0, relation="add-remove", budget=SMALL)


def test_a_mechanism_that_randomises_its_input_in_place_is_named_as_writing_not_as_unseeded():
    def local_noise_sum(data, rng):
        data += rng.laplace(0.0, 2.0, size=data.shape)
        return float(data.sum())

    with pytest.raises(MechanismError, match=WRITES) as error:
        audit(local_noise_sum, 1.0, relation="replace-one", budget=SMALL)
    assert "ignores its seed" not in str(error.value)  # before: "ignores its seed ... (it draws from an unseeded generator)"


def test_the_same_bug_on_a_copy_is_still_refuted():
    """The control: clipping a copy leaves the sum unclipped on every call, and the audit refutes it."""
    def clip_a_copy(data, rng):
        total = float(data.sum())
        data = np.clip(data, -1.0, 1.0)
        return total + rng.laplace(0.0, 1.0)

    result = audit(clip_a_copy, 1.0, relation="add-remove", pairs=far_pair(), budget=SMALL)
    assert not result.consistent and result.witness["change"]["after"] == 10.0


def test_worker_processes_pass_read_only_data_too():
    """A worker gets its data by pickle (writeable again): it is made read-only there as well."""
    def writes_now_and_then(data, rng):
        if rng.random() < 0.05:
            data[0] = 5.0
        return float(data[0]) + rng.laplace()

    data = np.zeros(3)
    runner = Runner(writes_now_and_then, workers=2)
    try:
        with pytest.raises(MechanismError, match=WRITES):
            runner.sample(data, 2_000, 0)
    finally:
        runner.close()
    assert not data.any()


def test_every_call_gets_a_fresh_dict_and_views_that_cannot_be_reshaped_for_the_next():
    seen = []

    def fn(data, rng):
        seen.append(sorted(data))
        data.pop("y")  # a fresh dict each call: the next call still has "y"
        data["X"].shape = (-1,)  # a fresh view each call: the next call sees the shape it was given
        return 0.0

    runner = Runner(fn)
    data = {"X": np.zeros((3, 1)), "y": np.ones(3)}
    runner.sample(data, 3, 0)
    assert seen == [["X", "y"]] * 3 and data["X"].shape == (3, 1)
    from dpfair_analysis.testing.runner import read_only

    with pytest.raises(ValueError, match="read-only"):
        read_only(np.zeros(2))[0] = 1.0


def test_assert_sensitivity_passes_read_only_data_and_fresh_dicts():
    def sums_then_clips(data):
        total = float(np.sum(data))
        np.clip(data, -1.0, 1.0, out=data)
        return total

    base = np.linspace(-10.0, 10.0, 8)
    # before: the first call clipped the fixed data set in place and every later pair was within the bound
    with pytest.raises(ValueError, match="release_fn writes to its input data"):
        assert_sensitivity(sums_then_clips, 1.0, relation="add-remove", norm=1, data=base, examples=20, seed=0)
    assert base[0] == -10.0

    def pops(data):
        return float(np.sum(data.pop("y")))

    table = {"X": np.zeros((4, 1)), "y": np.array([0.0, 1.0, 1.0, 0.0])}
    # before: the second call found no "y" in the dict the first call emptied (KeyError)
    report = assert_sensitivity(pops, 1.0, relation="add-remove", norm=1, data=table, examples=20, seed=0)
    assert report.tried > 0 and set(table) == {"X", "y"}


def test_audit_step_passes_read_only_training_data():
    def trains_in_place(data, rng):
        data *= 0.5  # normalises the training records in place
        return np.vstack([np.zeros(data.shape[1]), data.sum(axis=0) + rng.normal(size=data.shape[1])])

    data = np.ones((4, 2))
    with pytest.raises(MechanismError, match=WRITES):
        audit_step(trains_in_place, data=data, canary=np.array([1.0, 0.0]), delta=1e-5, epsilon=1.0, budget="smoke")
    assert (data == 1.0).all()


MECHANISMS = textwrap.dedent('''
    import numpy as np

    def clip_in_place(data, rng):
        total = float(data.sum())
        np.clip(data, -1.0, 1.0, out=data)
        return total + rng.laplace(0.0, 1.0)

    def pair():
        base = np.linspace(-1.0, 1.0, 8)
        return base, np.append(base, 10.0)
''')


def test_the_cli_refuses_a_mechanism_that_writes_to_its_data_with_status_2(tmp_path, capsys):
    path = tmp_path / "clip.py"
    path.write_text(MECHANISMS)
    status = main(["audit", "--target", f"{path}:clip_in_place", "--pair", f"{path}:pair", "--epsilon", "1",
                   "--relation", "add-remove", "--trials", "2000", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2  # before: 0, "consistent", with a witness whose added record was 1.0
    assert len(err) == 1 and WRITES in err[0] and err[0].startswith("dpfair: error:")


def test_the_plugin_reports_a_mechanism_that_writes_to_its_data_as_status_2(pytester):
    pytester.makepyfile(test_claim=textwrap.dedent('''
        import numpy as np
        import pytest

        def clip_in_place(data, rng):
            total = float(data.sum())
            np.clip(data, -1.0, 1.0, out=data)
            return total + rng.laplace(0.0, 1.0)

        @pytest.mark.dp(epsilon=1.0, relation="add-remove")
        def test_clip(dp):
            base = np.linspace(-1.0, 1.0, 8)
            dp.assert_private(clip_in_place, pairs=(base, np.append(base, 10.0)), trials=2000)
    '''))
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--dp-budget", "smoke")
    text = out.stdout.str()
    assert out.ret == 1 and WRITES in text
    assert any(line.startswith("[2]") and "bad input or broken mechanism" in line for line in text.splitlines())


def test_the_json_witness_is_the_pair_given(tmp_path, capsys):
    """A correct mechanism on the far pair: the witness shows the record that was added, 10.0."""
    path = tmp_path / "ok.py"
    path.write_text(MECHANISMS + textwrap.dedent('''
        def clip_a_copy_first(data, rng):
            return float(np.clip(data, -1.0, 1.0).sum()) + rng.laplace(0.0, 1.0)
    '''))
    main(["audit", "--target", f"{path}:clip_a_copy_first", "--pair", f"{path}:pair", "--epsilon", "1",
          "--relation", "add-remove", "--trials", "2000", "--json"])
    witness = json.loads(capsys.readouterr().out)["witness"]
    assert witness["change"]["after"] == 10.0 and witness["neighbour"][-1] == 10.0
