"""`%load_ext gan_lessons`: every cell runs under a doctor that reads names from the notebook as it runs."""

from gan_lessons.doctor.frames import clean_traceback


def load_ipython_extension(ip):
    """%load_ext gan_lessons: every cell runs under a doctor that reads names from the notebook's namespace as the
    cell runs; these errors get a diagnosis under the usual traceback, others pass untouched."""
    from gan_lessons.doctor import doctor
    state = {}

    def pre_run_cell(info=None):
        state["doc"] = doctor(namespaces=lambda: [ip.user_ns]).__enter__()
        _active.append(state["doc"])

    def post_run_cell(result=None):
        doc = state.pop("doc", None)
        if doc is not None:
            doc.__exit__(None, None, None)
            _active.remove(doc)

    def on_error(shell, kind, error, tb, tb_offset=None):
        tb = error.__traceback__ = clean_traceback(tb)
        shell.showtraceback((kind, error, tb), tb_offset=tb_offset)
        doc = state.get("doc")
        if doc is not None:
            doc.attach(error)
        return None

    ip.events.register("pre_run_cell", pre_run_cell)
    ip.events.register("post_run_cell", post_run_cell)
    ip.set_custom_exc((RuntimeError,), on_error)
    _installed[id(ip)] = (pre_run_cell, post_run_cell)

_installed: dict = {}

_active: list = []


def active():
    """The doctor watching the running cell under `%load_ext gan_lessons`, or None. lesson.expect_error asks it to
    diagnose an error the cell catches on purpose, so a lesson can show the extension's diagnosis and go on."""
    return _active[-1] if _active else None


def unload_ipython_extension(ip):
    """%unload_ext gan_lessons: back to plain tracebacks."""
    pre, post = _installed.pop(id(ip), (None, None))
    if pre is not None:
        post()          # the doctor entered for the cell that unloads it ends here, as that cell's end would end it
        ip.events.unregister("pre_run_cell", pre)
        ip.events.unregister("post_run_cell", post)
        ip.set_custom_exc((), None)
