"""Lesson 06's checker, check_resume: right checkpoints written differently are accepted, and each wrong one is
answered with a hint that names its mistake."""
import copy

import torch

from gan_lessons import exercises


def run(capsys, checker, *args, **kwargs):
    result = checker(*args, **kwargs)
    return result, capsys.readouterr().out


# --- right answers ------------------------------------------------------------------------------------------
def save_deepcopy(G, D, opt_G, opt_D, step):
    state = {"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(), "opt_D": opt_D.state_dict(),
             "rng": torch.get_rng_state(), "step": step}
    return copy.deepcopy(state)


def load_everything(state, G, D, opt_G, opt_D):
    G.load_state_dict(state["G"])
    D.load_state_dict(state["D"])
    opt_G.load_state_dict(state["opt_G"])
    opt_D.load_state_dict(state["opt_D"])
    torch.set_rng_state(state["rng"])
    return state["step"]


def save_cloned(G, D, opt_G, opt_D, step):           # each tensor cloned by hand; nested by kind; step as a tensor
    models = {name: {k: v.clone() for k, v in net.state_dict().items()} for name, net in (("G", G), ("D", D))}
    optimizers = [copy.deepcopy(opt.state_dict()) for opt in (opt_G, opt_D)]
    return {"models": models, "optimizers": optimizers, "random": torch.get_rng_state(),
            "progress": torch.tensor(step)}


def load_cloned(state, G, D, opt_G, opt_D):
    G.load_state_dict(state["models"]["G"])
    D.load_state_dict(state["models"]["D"])
    for opt, saved in zip((opt_G, opt_D), state["optimizers"]):
        opt.load_state_dict(saved)
    torch.set_rng_state(state["random"])
    return state["progress"].item()


# --- wrong answers, each a mistake students make -------------------------------------------------------------
def save_no_optimizers(G, D, opt_G, opt_D, step):     # "the weights are the model"
    return copy.deepcopy({"G": G.state_dict(), "D": D.state_dict(), "rng": torch.get_rng_state(), "step": step})


def load_no_optimizers(state, G, D, opt_G, opt_D):
    G.load_state_dict(state["G"])
    D.load_state_dict(state["D"])
    torch.set_rng_state(state["rng"])
    return state["step"]


def save_no_rng(G, D, opt_G, opt_D, step):
    return copy.deepcopy({"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(),
                          "opt_D": opt_D.state_dict(), "step": step})


def load_no_rng(state, G, D, opt_G, opt_D):
    G.load_state_dict(state["G"])
    D.load_state_dict(state["D"])
    opt_G.load_state_dict(state["opt_G"])
    opt_D.load_state_dict(state["opt_D"])
    return state["step"]


def save_no_step(G, D, opt_G, opt_D, step):
    return copy.deepcopy({"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(),
                          "opt_D": opt_D.state_dict(), "rng": torch.get_rng_state()})


def load_no_step(state, G, D, opt_G, opt_D):           # nothing to return: the loop would start again at 0
    G.load_state_dict(state["G"])
    D.load_state_dict(state["D"])
    opt_G.load_state_dict(state["opt_G"])
    opt_D.load_state_dict(state["opt_D"])
    torch.set_rng_state(state["rng"])


def save_references(G, D, opt_G, opt_D, step):        # every piece, but the live tensors, not copies
    return {"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(), "opt_D": opt_D.state_dict(),
            "rng": torch.get_rng_state(), "step": step}


def save_optimizer_references(G, D, opt_G, opt_D, step):     # the weights copied, Adam's moments not
    return {"G": copy.deepcopy(G.state_dict()), "D": copy.deepcopy(D.state_dict()), "opt_G": opt_G.state_dict(),
            "opt_D": opt_D.state_dict(), "rng": torch.get_rng_state(), "step": step}


def save_the_objects(G, D, opt_G, opt_D, step):       # pickles modules: weights_only loading refuses it
    return {"G": G, "D": D, "step": step}


def stub(*args):                                       # the student copy's body, as nbgrader leaves it
    # YOUR CODE HERE
    raise NotImplementedError()


def test_right_checkpoints_written_differently_are_accepted(capsys):
    for save, load in ((save_deepcopy, load_everything), (save_cloned, load_cloned)):
        ok, out = run(capsys, exercises.check_resume, save, load)
        assert ok is True and out.startswith("✓") and "bit for bit" in out, (save.__name__, out)


def load_popping(state, G, D, opt_G, opt_D):       # empties the checkpoint as it loads it: a kept best state is gone
    G.load_state_dict(state.pop("G"))
    D.load_state_dict(state.pop("D"))
    opt_G.load_state_dict(state.pop("opt_G"))
    opt_D.load_state_dict(state.pop("opt_D"))
    torch.set_rng_state(state.pop("rng"))
    return state.pop("step")


def test_a_load_that_empties_the_checkpoint_is_named(capsys):
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_popping)
    assert ok is False and "the checkpoint it was given holds other entries or values than before" in out, out
    assert out.count("✗") == 1, out


def test_optimizer_state_missing_names_adams_moments(capsys):
    ok, out = run(capsys, exercises.check_resume, save_no_optimizers, load_no_optimizers)
    assert ok is False and out.count("lost Adam's moments") == 2 and "state_dict()" not in out
    assert "random state" not in out and "step count in the checkpoint" not in out


def test_rng_state_missing_names_the_random_state(capsys):
    ok, out = run(capsys, exercises.check_resume, save_no_rng, load_no_rng)
    assert ok is False and "random state" in out and "different z" in out and "set_rng_state" not in out
    assert out.count("✗") == 1


def test_step_count_missing_names_the_step(capsys):
    ok, out = run(capsys, exercises.check_resume, save_no_step, load_no_step)
    assert ok is False and "load_state returned None" in out and "stopped after 3 steps" in out
    assert "starts again at step 0" in out and out.count("✗") == 1


def load_returning_the_state(state, G, D, opt_G, opt_D):      # everything loaded; the checkpoint returned
    load_everything(state, G, D, opt_G, opt_D)
    return state


def load_returning_text(state, G, D, opt_G, opt_D):            # everything loaded; the step as text
    return str(load_everything(state, G, D, opt_G, opt_D))


def test_a_step_returned_as_something_else_than_a_number_is_named_shortly(capsys):
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_returning_the_state)
    assert ok is False and "load_state returned {'G': " in out and "..., a dict, where the run" in out, out
    assert len(out) < 200 and out.count("✗") == 1, out
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_returning_text)
    assert ok is False and "load_state returned '3', a str, where the run that resumes needs the number" in out, out


def load_one_step_on(state, G, D, opt_G, opt_D):     # everything loaded, the step count off by one
    return load_everything(state, G, D, opt_G, opt_D) + 1


def save_one_step_back(G, D, opt_G, opt_D, step):
    return {**save_deepcopy(G, D, opt_G, opt_D, step), "step": step - 1}


def test_a_step_count_off_by_one_is_told_as_it_is(capsys):
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_one_step_on)
    assert ok is False and "starts at step 4 and skips 1 step(s)" in out and "step 0" not in out, out
    ok, out = run(capsys, exercises.check_resume, save_one_step_back, load_everything)
    assert ok is False and "starts at step 2 and trains 1 step(s) twice" in out and "step 0" not in out, out


def save_parameters_only(G, D, opt_G, opt_D, step):   # named_parameters(): BatchNorm's running statistics left out
    return copy.deepcopy({"G": dict(G.named_parameters()), "D": dict(D.named_parameters()),
                          "opt_G": opt_G.state_dict(), "opt_D": opt_D.state_dict(), "rng": torch.get_rng_state(),
                          "step": step})


def load_parameters_only(state, G, D, opt_G, opt_D):
    G.load_state_dict(state["G"], strict=False)
    D.load_state_dict(state["D"], strict=False)
    opt_G.load_state_dict(state["opt_G"])
    opt_D.load_state_dict(state["opt_D"])
    torch.set_rng_state(state["rng"])
    return state["step"]


def test_a_checkpoint_without_buffers_names_the_running_statistics(capsys):
    ok, out = run(capsys, exercises.check_resume, save_parameters_only, load_parameters_only)
    assert ok is False and "BatchNorm's running statistics are not" in out and out.count("✗") == 1, out


def test_live_references_are_named_not_copied(capsys):
    ok, out = run(capsys, exercises.check_resume, save_references, load_everything)
    assert ok is False and "changed after save_state returned" in out and "not copies" in out and out.count("✗") == 1
    ok, out = run(capsys, exercises.check_resume, save_optimizer_references, load_everything)
    assert ok is False and "while the run went on (opt_G.state.0." in out and "Adam's moments" in out


def test_objects_instead_of_data_are_refused_by_weights_only_loading(capsys):
    ok, out = run(capsys, exercises.check_resume, save_the_objects, load_everything)
    assert ok is False and "weights_only=True" in out


def test_unsolved_is_not_solved_yet(capsys):
    ok, out = run(capsys, exercises.check_resume, ..., load_everything)
    assert ok is False and out.startswith("?") and "not solved yet" in out
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, ...)
    assert ok is False and "not solved yet" in out and "load_state" in out
    ok, out = run(capsys, exercises.check_resume, stub, stub)
    assert ok is False and out.startswith("?") and "not solved yet" in out and "save_state" in out and "✗" not in out
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, stub)
    assert ok is False and out.startswith("?") and "not solved yet" in out and "load_state" in out
    ok, out = run(capsys, exercises.check_resume, lambda G, D, opt_G, opt_D, step: {"G": G.state_dict(), "rng": ...},
                  load_everything)
    assert ok is False and "a `...` is still in your function" in out


def load_then_evaluate(state, G, D, opt_G, opt_D):      # everything loaded, then both nets put in eval mode
    step = load_everything(state, G, D, opt_G, opt_D)
    G.eval()
    D.eval()
    return step


def load_then_evaluate_D(state, G, D, opt_G, opt_D):    # D has no BatchNorm or dropout: its mode changes nothing
    step = load_everything(state, G, D, opt_G, opt_D)
    D.eval()
    return step


def test_nets_left_in_eval_mode_after_load_are_named_where_the_mode_changes_the_steps(capsys):
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_then_evaluate)
    assert ok is False and "G's BatchNorm is in eval mode" in out and out.count("✗") == 1, out
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_then_evaluate_D)
    assert ok is True, out


def load_then_a_sanity_forward(state, G, D, opt_G, opt_D):   # everything loaded, then G run once in train mode
    step = load_everything(state, G, D, opt_G, opt_D)
    with torch.no_grad():
        G(torch.randn(4, 4))
    return step


def test_statistics_moved_by_a_forward_after_loading_are_not_called_missing(capsys):
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_then_a_sanity_forward)
    assert ok is False and "load_state ran 1 forward(s) of G in training mode" in out and "did not come back" not in out


def load_steps_left(state, G, D, opt_G, opt_D):      # everything loaded; returns the steps left of a run of 6
    load_everything(state, G, D, opt_G, opt_D)
    return 6 - state["step"]


def test_a_step_that_fits_one_run_only_is_caught_on_a_second_save(capsys):
    ok, out = run(capsys, exercises.check_resume, save_deepcopy, load_steps_left)
    assert ok is False and "a run saved after 2 steps resumes from step 4" in out, out
