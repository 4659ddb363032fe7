"""Build-or-fix exercises: the student writes or fixes a function, and its checker runs it and says what is still
wrong. Each exercise is one declaration (exercise.Exercise: the function the student writes, the reference answer,
the problem it runs on, its checks, hints and success line), and every checker is one grading function,
exercise.grade, called on it: it prints one "✓ ..." line when the answer is right, otherwise one line per
remaining problem (what is wrong, never the fix), and returns True or False; it never raises: an exercise left as
`...` or as nbgrader's stub prints "not solved yet". A lesson's test cell (nbgrader's autograder test) asserts on
that verdict:

    my_answer = sgd_step  # SOLUTION: point this at your function

    solved = exercises.check_sgd_step(my_answer)     # the next cell, locked: SGD_STEP.check, grade(SGD_STEP, ...)
    assert solved, "sgd_step: not solved yet, or not right: ..."

One module per lesson (lesson01 ... lesson14; lesson08_gp holds lesson 08's gradient penalty; lesson11, the
engine of lessons 11 and 12, and lesson13 are packages, one module per part) holds that lesson's declarations, their
checks and the reference answers; exercise holds the declaration, grade, and the outcome an answer has on its
problem (what the mutation tests judge a checker by); feedback the wording every checker shares (the feedback
lines, the autograd hints, known wrong answers); steps the engine that records the gradients each optimizer steps on
(recorded_steps) and compares them; variants the known answers written as edits of a reference (variant); and
diagnosis_key lesson 07's key to the doctor's diagnoses (a prediction, not a build). SOLUTIONS names the reference
each lesson's solution block is filled from. Every checker is importable from here."""
from gan_lessons.engine import Core, Counted
from gan_lessons.engine import Value as EngineValue
from gan_lessons.exercises.diagnosis_key import check_diagnosis
from gan_lessons.exercises.exercise import Exercise, grade
from gan_lessons.exercises.feedback import ELLIPSIS_HINT
from gan_lessons.exercises.lesson01 import INIT, SGD_STEP, check_init, check_sgd_step
from gan_lessons.exercises.lesson02 import CHAIN_STEP, check_chain_step, reference_chain_step
from gan_lessons.exercises.lesson03 import STALE_SAVED, check_stale_saved, reference_stale_saved
from gan_lessons.exercises.lesson04 import D_STEP, SAMPLE, check_d_step, check_sample, reference_d_step
from gan_lessons.exercises.lesson05 import STRATEGY, check_strategy
from gan_lessons.exercises.lesson06 import LOAD_STATE, SAVE_STATE, check_resume
from gan_lessons.exercises.lesson07 import (
    DOCTOR_BUG,
    DOCTOR_KINDS,
    SEED000_STEP,
    check_doctor_bug,
    check_seed000_step,
    reference_seed000_step,
)
from gan_lessons.exercises.lesson08 import LAZY_R1, check_lazy_r1
from gan_lessons.exercises.lesson08_gp import GRADIENT_PENALTY, check_gradient_penalty
from gan_lessons.exercises.lesson09 import FROZEN_G_STEP, check_frozen_g_step, reference_frozen_g_step
from gan_lessons.exercises.lesson10 import AMP_STEP, check_amp_step, reference_amp_step
from gan_lessons.exercises.lesson11 import (
    ENGINE_STEPS,
    check_freeing,
    check_leaf_rule,
    check_numerical_grad,
    check_saving,
    check_training,
    check_versions,
    engine_or_reference,
)
from gan_lessons.exercises.lesson11.numerics import finished_numerical_grad
from gan_lessons.exercises.lesson11.training import finished_fit
from gan_lessons.exercises.lesson13 import (
    check_amp_lab,
    check_biggan_train,
    check_compiled_step,
    check_rnn_train,
    check_srgan_step,
    check_wgan_gp,
    lab_problem,
)
from gan_lessons.exercises.lesson13.amp import OPTIMIZE_PARAMETERS
from gan_lessons.exercises.lesson13.biggan import TRAIN
from gan_lessons.exercises.lesson13.compiled import TRAIN_STEP
from gan_lessons.exercises.lesson13.rnn import TRAIN_RNN
from gan_lessons.exercises.lesson13.srgan import SRGAN_STEP
from gan_lessons.exercises.lesson13.wgan_gp import MAKE_CRITIC, TRAIN_CRITIC
from gan_lessons.exercises.lesson14 import DDP_D_STEP, check_ddp_accumulation
from gan_lessons.exercises.steps import recorded_steps

# The build exercises whose checker compares with a reference answer on a problem, each declared in its lesson's
# module; the others are graded on programs of their own (the engine's steps) or have no one right answer (a bug
# brought to the doctor).
EXERCISES: list[Exercise] = [SGD_STEP, INIT, CHAIN_STEP, STALE_SAVED, D_STEP, SAMPLE, STRATEGY, SAVE_STATE,
                             LOAD_STATE, SEED000_STEP, GRADIENT_PENALTY, LAZY_R1, FROZEN_G_STEP, AMP_STEP, SRGAN_STEP,
                             TRAIN, MAKE_CRITIC, TRAIN_CRITIC, OPTIMIZE_PARAMETERS, TRAIN_RNN, TRAIN_STEP, DDP_D_STEP]
ALL_EXERCISES: list[Exercise] = [*EXERCISES, DOCTOR_BUG, *ENGINE_STEPS]
# Each one's reference, by lesson and the name of the function the student writes: the one source of the code in
# that lesson's solution block. tools/build_notebook.py fills the block from it in both editions (the English block
# is the reference's body as it is, comments included; the Chinese one has the same code with its comments in
# Chinese), and its --check fails where they differ.
SOLUTIONS: dict[str, dict] = {}
for _exercise in EXERCISES:
    SOLUTIONS.setdefault(_exercise.lesson, {})[_exercise.name] = _exercise.reference
# The engine's steps are methods written one at a time: each block's reference is the method of the reference engine
# (gan_lessons.engine), and lesson 12 writes `_inplace` twice (step 3 counts, step 4 adds the leaf rule): a list
# holds a name's references in the order of its blocks.
SOLUTIONS["11"] = {name: getattr(Core, name) for name in ("save", "__mul__", "exp", "__matmul__", "backward")}
SOLUTIONS["12"] = {"unpack": Counted.unpack, "_inplace": [Counted._inplace, EngineValue._inplace],
                   "numerical_grad": finished_numerical_grad, "tanh": EngineValue.tanh, "fit": finished_fit}

__all__ = [
    "ALL_EXERCISES", "DOCTOR_KINDS", "ELLIPSIS_HINT", "EXERCISES", "Exercise", "SOLUTIONS", "grade",
    "recorded_steps",
    "check_sgd_step", "check_init",                                  # lesson 01
    "check_chain_step", "reference_chain_step",                      # lesson 02
    "check_stale_saved", "reference_stale_saved",                    # lesson 03
    "check_d_step", "reference_d_step", "check_sample",              # lesson 04
    "check_strategy",                                                # lesson 05
    "check_resume",                                                  # lesson 06
    "check_doctor_bug", "check_seed000_step", "reference_seed000_step", "check_diagnosis",  # lesson 07
    "check_gradient_penalty", "check_lazy_r1",                       # lesson 08
    "check_frozen_g_step", "reference_frozen_g_step",                # lesson 09
    "check_amp_step", "reference_amp_step",                          # lesson 10
    "check_saving", "check_freeing", "check_versions", "check_leaf_rule", "check_numerical_grad", "check_training",
    "engine_or_reference",                                           # lessons 11 and 12
    "check_srgan_step", "check_biggan_train", "check_wgan_gp", "check_amp_lab", "check_rnn_train",
    "check_compiled_step", "lab_problem",                            # lesson 13
    "check_ddp_accumulation",                                        # lesson 14
]
