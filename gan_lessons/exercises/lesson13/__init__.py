"""Lesson 13's debugging lab: six training steps from public bug reports, scaled down, each graded by behaviour.

Each lab runs the student's fixed step (or few-step loop) on the lab's own small models, optimizers and batches, and
records, at every optimizer's every step(), the gradient it steps on (steps.recorded_steps). The same run with
the reference fix gives the right gradients; the feedback names the optimizer, the step and what its gradient was
(so many times the right one, the right one plus an earlier step's, ...), and the known wrong fixes by name. Some
labs also compare state that no optimizer steps on (an EMA copy's weights, a GradScaler's scale).

    exercises.check_srgan_step(my_answer)             # SRGAN_STEP.check: grade() on the lab's declaration

`lab_problem(name)` gives a lab's fresh arguments, to run a broken version by hand (or under the doctor)."""
from gan_lessons.exercises.lesson13.amp import check_amp_lab
from gan_lessons.exercises.lesson13.biggan import (
    G_D,
    check_biggan_train,
    discriminator_loss,
    generator_loss,
    toggle_grad,
)
from gan_lessons.exercises.lesson13.compiled import check_compiled_step
from gan_lessons.exercises.lesson13.grading import (
    LABS,
    Lab,
    first_wrong_step,
    gradient_ratio,
    step_that_clears_the_error,
)
from gan_lessons.exercises.lesson13.rnn import check_rnn_train
from gan_lessons.exercises.lesson13.srgan import check_srgan_step
from gan_lessons.exercises.lesson13.symptoms import Log, reference_log, show_log, training_log
from gan_lessons.exercises.lesson13.wgan_gp import Discriminator, Generator, check_wgan_gp, sample_mixing, wgan_problem


def mixes_samples(D):
    """How much D's output for image 0 of a batch changes with the other images (the largest gradient entry of it
    with respect to them); 0 for a critic that treats each sample on its own."""
    return sample_mixing(D)


def lab_problem(name, make_critic=None):
    """A lab's arguments for one call (call 0), fresh: to run a broken version by hand or under the doctor."""
    if name == "wgan_gp":
        return wgan_problem(make_critic or Discriminator)[0](0)
    return LABS[name].problem()[0](0)


__all__ = ["LABS", "Lab", "lab_problem", "step_that_clears_the_error", "first_wrong_step", "gradient_ratio",
           "mixes_samples", "check_srgan_step", "check_biggan_train", "check_wgan_gp", "check_amp_lab",
           "check_rnn_train", "check_compiled_step", "Discriminator", "Generator", "G_D", "discriminator_loss",
           "generator_loss", "toggle_grad", "Log", "training_log", "reference_log", "show_log"]
