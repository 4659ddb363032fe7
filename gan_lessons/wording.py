"""Error messages that name settings, worded for their reader (lesson 06: the trainer and its command line).

A message is written as a template in which each setting stands in braces the way a Python caller names it:
{lr_G} (a TrainConfig field), {resume=True} (train's switch). `worded` makes the error with its message worded that
way; `reword` words the same error for a front end that names the settings otherwise, from a table such as the
command line's {"lr_G": "--lr-g", "resume=True": "--resume"} (gan_lessons.__main__.WORDS). What a user chose (a
number, a path, which may hold braces) never goes into the template: it is given as a keyword and shown as it is."""


class _Fill(dict):
    """A template's fill: the values and the front end's words; any other placeholder is worded as written."""

    def __missing__(self, key):
        return key


def worded(cls, template: str, /, **values) -> Exception:
    """cls(message): `template` filled with `values`, each setting worded as written; `reword` can word it again."""
    error = cls(template.format_map(_Fill(values)))
    error.template, error.values = template, values
    return error


def reword(error: BaseException, words: dict) -> str:
    """The message of `error` with each setting in `words` worded so; an error not made by `worded` as it is."""
    template = getattr(error, "template", None)
    if template is None:
        return str(error)
    return template.format_map(_Fill({**words, **getattr(error, "values", {})}))
