"""Lessons 11 and 12's exercises: a tiny reverse-mode engine of the student's own, built step by step, each step checked
against torch on the same programs: what each operation saves (check_saving), backward and freeing (check_freeing),
version counters (check_versions), the leaf rule (check_leaf_rule), a finite-difference gradient
(check_numerical_grad), and a model trained on the engine (check_training).

The reference engine is gan_lessons.engine (with what a lesson cell runs on while the student's is not finished, and
PyTorch's words for the three errors), and graphs.draw_engine draws an engine's graph. Here, one module per part:
`cases` the programs, run on torch or on an engine and compared; `saving`, `backward`, `versions`, `numerics`,
`training` one step's declaration and checks each."""
from gan_lessons.engine import (
                                                   LEAF_IN_PLACE,
                                                   SECOND_TIME,
                                                   Value,
                                                   engine_after_lesson_11,
                                                   engine_or_reference,
                                                   version_error,
)
from gan_lessons.exercises.lesson11.backward import FREEING, check_freeing
from gan_lessons.exercises.lesson11.cases import compare, programs, run, version_parts
from gan_lessons.exercises.lesson11.numerics import NUMERICAL_GRAD, check_numerical_grad, numerical_grad_or_finished
from gan_lessons.exercises.lesson11.saving import SAVING, check_saving
from gan_lessons.exercises.lesson11.training import (
                                                   TRAINING,
                                                   check_training,
                                                   fit_or_finished,
                                                   torch_fit,
                                                   training_problem,
)
from gan_lessons.exercises.lesson11.versions import LEAF_RULE, VERSIONS, check_leaf_rule, check_versions
from gan_lessons.graphs import draw_engine

ENGINE_STEPS = [SAVING, FREEING, VERSIONS, LEAF_RULE, NUMERICAL_GRAD, TRAINING]     # in the lessons' order

__all__ = ["ENGINE_STEPS", "LEAF_IN_PLACE", "SECOND_TIME", "Value", "engine_or_reference", "engine_after_lesson_11", "version_error",
           "compare", "programs",
           "run", "version_parts", "draw_engine", "training_problem", "torch_fit", "numerical_grad_or_finished",
           "fit_or_finished",
           "check_saving", "check_freeing", "check_versions", "check_leaf_rule", "check_numerical_grad",
           "check_training"]
