"""nbgrader's configuration for a course made of these lessons (and for the student copies in notebooks/student/,
which tools/student.py makes with it): nbgrader's own steps, after gan_lessons.release.StudentCopy, which blanks
the predictions, hides their explanations and moves what answers the exercises after them.

Copy this file into a course directory (beside source/), or run nbgrader from the repository's root."""
from nbgrader.converters import GenerateAssignment

from gan_lessons.release import StudentCopy

c = get_config()  # noqa: F821 (nbgrader's config loader provides it)
c.GenerateAssignment.preprocessors = [StudentCopy, *GenerateAssignment.class_traits()["preprocessors"].default()]
c.ClearSolutions.enforce_metadata = True
# nbgrader gives a cell 30 s by default; lesson 14's cells start two processes each, and on a busy grading machine one
# of them took longer than that. Ten minutes: a cell that runs this long is stuck, not slow.
c.Execute.timeout = 600
