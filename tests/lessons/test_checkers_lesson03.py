"""Lesson 03's checker, check_stale_saved: right probes written differently are accepted, and each wrong probe a
student writes is answered with a hint that names its mistake."""
import pytest
import torch

from gan_lessons import exercises, graphs


def run(capsys, probe):
    result = exercises.check_stale_saved(probe)
    return result, capsys.readouterr().out


# --- right answers, written differently ------------------------------------------------------------------------
def probe_by_id(make_loss):
    """Versions kept in a dict by id, backward inside the with, entries as lists: wrong where one tensor is saved at
    two versions (the dict keeps the last)."""
    versions, stale = {}, []

    def pack(t):
        versions[id(t)] = t._version
        return t

    def unpack(t):
        if t._version > versions[id(t)]:
            stale.append([list(t.shape), versions[id(t)], t._version])
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        make_loss().backward()
    return stale


class Probe:
    """A probe object: pack hands back an index into the probe's own list."""

    def __init__(self):
        self.saved, self.stale = [], []

    def pack(self, t):
        self.saved.append((t, t._version))
        return len(self.saved) - 1

    def unpack(self, k):
        t, version = self.saved[k]
        if t._version != version:
            self.stale.append((t.shape, version, t._version))
        return t


def probe_object(make_loss):
    probe = Probe()
    with torch.autograd.graph.saved_tensors_hooks(probe.pack, probe.unpack):
        loss = make_loss()
    loss.backward()
    return probe.stale


@pytest.mark.parametrize("probe", [exercises.reference_stale_saved, probe_object])
def test_right_probes_are_accepted(capsys, probe):
    ok, out = run(capsys, probe)
    assert ok is True and out.startswith("✓") and "all 6 graphs" in out, out


def probe_first_record(make_loss):               # the version when saved looked up by the tensor: the first save's
    records, stale = [], []

    def pack(t):
        records.append((t, t._version))
        return t

    def unpack(t):
        version = next(v for saved, v in records if saved is t)
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = make_loss()
    loss.backward()
    return stale


@pytest.mark.parametrize("probe", [probe_by_id, probe_first_record])
def test_a_version_looked_up_by_the_tensor_is_told_the_tensor_is_saved_at_two_versions(capsys, probe):
    ok, out = run(capsys, probe)
    assert ok is False and "y * y" in out and "is saved at two versions, 0 and 1" in out, out


# --- wrong answers, each named ---------------------------------------------------------------------------------
def probe_outside(make_loss):                  # the hooks are on only around the backward: pack never runs
    stale = []
    loss = make_loss()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t, t._version), lambda p: p[0]):
        loss.backward()
    return stale


def probe_copy(make_loss):                     # packs a clone: it never changes, so it never looks stale
    stale = []

    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t.clone(), t._version), unpack):
        loss = make_loss()
    loss.backward()
    return stale


def probe_version_at_unpack(make_loss):        # reads the version only at backward: compares it with itself
    stale = []

    def unpack(t):
        saved_version = t._version
        if t._version != saved_version:
            stale.append((tuple(t.shape), saved_version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        loss = make_loss()
    loss.backward()
    return stale


def probe_no_backward(make_loss):              # never runs backward, so unpack never runs
    stale = []

    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t, t._version), unpack):
        make_loss()
    return stale


def probe_reports_all(make_loss):              # reports every unpacked tensor, stale or not
    report = []

    def unpack(packed):
        t, version = packed
        report.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t, t._version), unpack):
        loss = make_loss()
    loss.backward()
    return report


def probe_unpack_returns_pair(make_loss):      # forgets to hand the tensor back from unpack
    stale = []

    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return packed
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t, t._version), unpack):
        loss = make_loss()
    loss.backward()
    return stale


def probe_pack_returns_nothing(make_loss):     # pack records the version but returns None
    versions, stale = [], []

    def pack(t):
        versions.append(t._version)

    def unpack(packed):
        t, version = packed
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = make_loss()
    loss.backward()
    return stale


def probe_versions_swapped(make_loss):         # (shape, now, saved)
    return [(shape, now, saved) for shape, saved, now in exercises.reference_stale_saved(make_loss)]


def probe_a_set(make_loss):                    # a set: `a * a`'s two stale saved tensors become one entry
    return set(exercises.reference_stale_saved(make_loss))


def probe_returns_count(make_loss):
    return len(exercises.reference_stale_saved(make_loss))


def probe_one_change_assumed(make_loss):      # the version at backward taken as one more than when saved
    stale = []

    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, version + 1))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t, t._version), unpack):
        loss = make_loss()
    loss.backward()
    return stale


def probe_values_compared(make_loss):          # stale taken as "the values changed": writes that keep them are missed
    stale = []

    def unpack(packed):
        t, version, copy = packed
        if not torch.equal(t, copy):
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t, t._version, t.detach().clone()), unpack):
        loss = make_loss()
    loss.backward()
    return stale


@pytest.mark.parametrize("probe, named", [
    (probe_outside, ["autograd's own version check", "ran while your hooks were not on"]),
    (probe_copy, ["you packed a copy", "never looks stale"]),
    (probe_version_at_unpack, ["you reported nothing", "whose version had moved"]),
    (probe_no_backward, ["no backward ran", "unpack is called when backward reads"]),
    (probe_reports_all, ["whose version did not change"]),
    (probe_unpack_returns_pair, ["your unpack gave autograd something that is not a tensor"]),
    (probe_pack_returns_nothing, ["your pack returned None"]),
    (probe_versions_swapped, ["other way round"]),
    (probe_a_set, ["saves a twice", "one entry per saved tensor"]),
    (probe_returns_count, ["return a list with one (shape"]),
    (probe_one_change_assumed, ["y.mul_(1) and y.add_(0)", "((4,), 0, 1)", "((4,), 0, 2)"]),
    (probe_values_compared, ["y.mul_(1) and y.add_(0)", "you reported nothing", "whose version had moved"]),
])
def test_each_wrong_probe_is_named(capsys, probe, named):
    ok, out = run(capsys, probe)
    assert ok is False and out.startswith("✗"), out
    for words in named:
        assert words in out, (words, out)
    assert out.count("✗") == 1, out


def test_a_probe_that_runs_no_backward_is_told_so_where_its_report_is_right(capsys):
    """Where nothing is stale, an empty report is right: what is wrong there is that no backward ran."""
    def probe_forward_only(make_loss):
        make_loss()
        return []
    ok, out = run(capsys, probe_forward_only)
    assert ok is False and ("no backward ran" in out) and "the very tensor pack received" not in out, out


def probe_assumes_saved_at_0(make_loss):         # takes every saved tensor to have been at version 0 when saved
    stale = []

    def unpack(t):
        if t._version != 0:
            stale.append((tuple(t.shape), 0, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        loss = make_loss()
    loss.backward()
    return stale


def probe_autograd_grad(make_loss):              # the right report, through torch.autograd.grad: .grad stay empty
    stale = []

    def pack(t):
        return t, t._version

    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = make_loss()
    leaves = [fn.variable for fn in graphs.walk([loss]) if hasattr(fn, "variable")]
    torch.autograd.grad(loss, leaves)
    return stale


def test_a_wrong_report_is_told_what_differs_not_the_reports_recipe(capsys):
    ok, out = run(capsys, probe_assumes_saved_at_0)
    assert ok is False and "saved at two versions, 0 and 1" in out and "t._version" not in out, out
    assert "pack" not in out, out


def test_a_right_report_through_autograd_grad_is_told_the_grads_are_empty_not_that_no_backward_ran(capsys):
    ok, out = run(capsys, probe_autograd_grad)
    assert ok is False and ".grad are left empty" in out and "no backward ran" not in out, out


def probe_backward_twice(make_loss):             # the right report, but two backwards through the loss
    stale = []

    def pack(t):
        return t, t._version

    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((t.shape, version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = make_loss()
        loss.backward(retain_graph=True)
        loss.backward()
    return stale[:len(stale) // 2]


def test_a_probe_that_runs_backward_twice_is_told_what_was_measured(capsys):
    ok, out = run(capsys, probe_backward_twice)
    assert ok is False and "gradients are 2 times those of one backward" in out, out
    assert "unpack must return" not in out, out


def probe_runs_make_loss_twice(make_loss):       # a first run outside the hooks, then the probe's own run
    make_loss()
    return exercises.reference_stale_saved(make_loss)


def test_a_probe_that_runs_make_loss_twice_is_told_so_not_given_the_report_s_format(capsys):
    ok, out = run(capsys, probe_runs_make_loss_twice)
    assert ok is False and "make_loss ran 2 times in one call of your probe" in out, out
    assert "Hint: report one" not in out, out


def test_a_wrong_probe_says_on_which_graph(capsys):
    ok, out = run(capsys, probe_copy)
    assert "on y = a.exp(), then y.add_(1)" in out and "the stale saved tensors are [((5,), 0, 1)]" in out
    assert "(and 5 more of the 6 graphs)" in out, out


def test_unanswered_and_the_student_copys_stub_say_not_solved_yet(capsys):
    ok, out = run(capsys, ...)
    assert ok is False and out.startswith("?") and "not solved yet" in out

    def stale_saved(make_loss):
        # YOUR CODE HERE
        raise NotImplementedError()
    ok, out = run(capsys, stale_saved)
    assert ok is False and out.startswith("? stale_saved: not solved yet") and "✗" not in out, out


def test_the_probe_sees_what_autograd_no_longer_checks():
    """Under the hooks autograd skips its own version check: the reference probe is the only one that notices."""
    a = torch.ones(3, requires_grad=True)

    def make_loss():
        y = a.exp()
        y.mul_(2)
        return y.sum()
    assert exercises.reference_stale_saved(make_loss) == [((3,), 0, 1)]
    assert torch.allclose(a.grad, 4 * torch.exp(torch.ones(3)))       # silently wrong: the right one is 2e


def test_an_entry_reported_twice_is_counted(capsys):
    def probe_twice(make_loss):
        stale = exercises.reference_stale_saved(make_loss)
        return stale + stale
    ok, out = run(capsys, probe_twice)
    assert ok is False and "you reported ((5,), 0, 1) 2 times, where 1 saved tensor(s) had those versions" in out, out


def test_a_loss_made_under_no_grad_is_told_it_has_no_graph(capsys):
    def probe_under_no_grad(make_loss):
        with torch.no_grad():
            loss = make_loss()
        loss.backward()
        return []
    ok, out = run(capsys, probe_under_no_grad)
    assert ok is False and "has no graph: autograd was not recording when it ran" in out, out


def probe_backward_of_a_scaled_loss(make_loss):   # the right report, one backward of twice the loss
    stale = []

    def unpack(packed):
        t, version = packed
        if t._version != version:
            stale.append((tuple(t.shape), version, t._version))
        return t
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (t, t._version), unpack):
        loss = make_loss()
    (loss * 2).backward()
    return stale


def test_gradients_twice_those_of_one_backward_are_not_blamed_on_a_second_backward_that_did_not_run(capsys):
    ok, out = run(capsys, probe_backward_of_a_scaled_loss)
    assert ok is False and "2 times those of one backward" in out and "ran 2 times" not in out, out
    ok, out = run(capsys, probe_backward_twice)
    assert ok is False and "backward ran 2 times through the loss" in out, out
