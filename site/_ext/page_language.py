"""Each page of the site says its own language in its <html lang="...">: a Chinese page "zh-CN" in the English
book, an English page "en" in the Chinese one (Sphinx gives every page the book's language). Screen readers and
browsers (fonts, hyphenation, translation offers) read it."""


def page_language(pagename: str) -> str:
    chinese = pagename == "README.zh-CN" or pagename.startswith("notebooks/zh/")
    return "zh-CN" if chinese else "en"


def _set(app, pagename, templatename, context, doctree):
    context["language"] = page_language(pagename)


def setup(app):
    app.connect("html-page-context", _set)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
