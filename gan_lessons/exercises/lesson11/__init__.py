"""Lesson 11's exercises: a tiny reverse-mode engine of the student's own, built in four steps, each checked against
torch on the same programs (check_saving, check_freeing, check_versions, check_leaf_rule).

`Value` below is the reference engine, micrograd style: the lesson's answers, and what a lesson cell runs on when
the student's engine is not finished yet (engine_or_reference). A program is a few lines of Python over `leaf(shape,
requires_grad=...)`, `no_grad()` and the operations both engines share (`+`, `*`, `@`, `.exp()`, `.sum()`, `.add_`,
`.mul_`, `.backward(retain_graph=...)`); run() executes one on torch or on an engine, and the checkers compare what
happens: the error raised (kind, and for the version error the shape and versions), else every leaf's gradient."""
from gan_lessons.exercises.lesson11.engine import LEAF_IN_PLACE, SECOND_TIME, Value, engine_or_reference, version_error
from gan_lessons.exercises.lesson11.cases import compare, programs, run, version_parts
from gan_lessons.exercises.lesson11.saving import check_saving
from gan_lessons.exercises.lesson11.steps import check_freeing, check_leaf_rule, check_versions

__all__ = ["LEAF_IN_PLACE", "SECOND_TIME", "Value", "engine_or_reference", "version_error", "compare", "programs", "run", "version_parts",
           "check_saving", "check_freeing", "check_versions", "check_leaf_rule"]
