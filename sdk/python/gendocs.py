"""gendocs.py OUTDIR -- the SDK's reference as static HTML, generated from its docstrings.

Standard library only (inspect). Writes OUTDIR/index.html and one page per public module
(space.client.html, space.aio.html, space.errors.html, space.records.html). Every link is
relative and stays inside OUTDIR, so the folder can be copied anywhere in a site.
Docstring markup understood: ``code``, :class:/:meth:/:attr:/:mod: roles (linked when they
name something documented here), ``::`` literal blocks, "- " lists, blank-line paragraphs.
"""

import html
import inspect
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import space  # noqa: E402
from space import aio, client, errors, records  # noqa: E402

MODULES = [
    (client, "The blocking client"),
    (aio, "The asyncio client"),
    (errors, "Errors"),
    (records, "Records"),
]

CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
code,pre{font:13px/1.4 ui-monospace,monospace;background:#f4f4f4}
code{padding:0 .2em}pre{padding:.6em;overflow-x:auto}
h2{border-bottom:1px solid #ddd;margin-top:2.5rem}h3{margin-bottom:.2rem}
.sig{font:14px ui-monospace,monospace;background:#eef3fb;padding:.3em .5em;display:block}
.member{margin-left:1.5rem}nav a{margin-right:1em}a{color:#0645ad}
"""


def page_of(mod):
    return f"{mod.__name__}.html"


def public_classes(mod):
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    out = []
    for n in names:
        obj = getattr(mod, n, None)
        if inspect.isclass(obj) and obj.__module__ == mod.__name__:
            out.append(obj)
    return out


def public_functions(mod):
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    return [getattr(mod, n) for n in names
            if inspect.isfunction(getattr(mod, n, None)) and getattr(mod, n).__module__ == mod.__name__]


def render_function(fn, table):
    return (f'<h2 id="{fn.__name__}"><span class="sig">{signature(fn.__name__, fn)}</span></h2>'
            f"{render_doc(fn.__doc__, table)}")


def symbol_table():
    """name -> href, for classes (``Client``) and their members (``Client.info``)."""
    table = {}
    for mod, _ in MODULES:
        table[mod.__name__] = page_of(mod)
        for cls in public_classes(mod):
            href = f"{page_of(mod)}#{cls.__name__}"
            table[cls.__name__] = href
            for name, _member in members(cls):
                table[f"{cls.__name__}.{name}"] = f"{page_of(mod)}#{cls.__name__}.{name}"
        for fn in public_functions(mod):
            table[fn.__name__] = f"{page_of(mod)}#{fn.__name__}"
    return table


def members(cls):
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_") or not (inspect.isfunction(value) or isinstance(value, property)):
            continue
        out.append((name, value))
    # aliases (connect = get) are documented under their own name too
    return out


ROLE = re.compile(r":(class|meth|attr|mod|func):`~?([^`]+)`")
CODE = re.compile(r"``(.+?)``")


def inline(text, table):
    parts = []
    pos = 0
    for m in ROLE.finditer(text):
        parts.append(("text", text[pos:m.start()]))
        parts.append(("role", m.group(2)))
        pos = m.end()
    parts.append(("text", text[pos:]))
    out = []
    for kind, value in parts:
        if kind == "text":
            esc = html.escape(value)
            out.append(CODE.sub(lambda m: f"<code>{m.group(1)}</code>", esc))
            continue
        target = value[6:] if value.startswith("space.") and value not in table else value
        href = table.get(target) or table.get(target.rsplit(".", 1)[-1])
        label = html.escape(target)
        out.append(f'<a href="{href}"><code>{label}</code></a>' if href else f"<code>{label}</code>")
    return "".join(out)


def render_doc(doc, table):
    """A docstring as HTML paragraphs, lists and literal blocks."""
    if not doc:
        return ""
    lines = inspect.cleandoc(doc).split("\n")
    out, para, items = [], [], []
    i = 0

    def flush():
        if para:
            text = " ".join(para)
            literal = text.endswith("::")
            if text == "::":
                text = ""
            elif literal:
                text = text[:-1]
            if text:
                out.append(f"<p>{inline(text, table)}</p>")
            para.clear()
            return literal
        return False

    def flush_items():
        if items:
            out.append("<ul>" + "".join(f"<li>{inline(t, table)}</li>" for t in items) + "</ul>")
            items.clear()

    while i < len(lines):
        line = lines[i]
        if line.strip() == "":
            flush_items()
            literal = flush()
            i += 1
            if literal:
                block = []
                while i < len(lines) and (lines[i].startswith("    ") or lines[i].strip() == ""):
                    block.append(lines[i][4:])
                    i += 1
                while block and not block[-1].strip():
                    block.pop()
                if block:
                    out.append("<pre>" + html.escape("\n".join(block)) + "</pre>")
            continue
        if line.strip() == "::" and items:
            flush_items()
            para.append("::")
        elif line.startswith("- "):
            flush()
            items.append(line[2:])
        elif items and line.startswith("  "):
            items[-1] += " " + line.strip()
        else:
            flush_items()
            para.append(line.strip())
        i += 1
    flush_items()
    flush()
    return "\n".join(out)


def signature(name, fn):
    try:
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
        text = f"{name}({', '.join(str(p) for p in params)})"
    except (TypeError, ValueError):
        text = f"{name}(...)"
    prefix = "async " if inspect.iscoroutinefunction(fn) else ""
    return html.escape(prefix + text)


def render_class(cls, table):
    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    base_html = ", ".join(
        f'<a href="{table[b]}">{html.escape(b)}</a>' if b in table else html.escape(b) for b in bases)
    head = f'<h2 id="{cls.__name__}">class {cls.__name__}' + (f"({base_html})" if bases else "") + "</h2>"
    body = [head]
    init = vars(cls).get("__init__")
    if init is not None and not issubclass(cls, BaseException):
        body.append(f'<span class="sig">{signature(cls.__name__, init)}</span>')
    body.append(render_doc(cls.__doc__, table))
    for name, member in members(cls):
        anchor = f"{cls.__name__}.{name}"
        if isinstance(member, property):
            sig = html.escape(name) + " <em>(property)</em>"
            doc = member.fget.__doc__ if member.fget else ""
        else:
            sig = signature(name, member)
            doc = member.__doc__
            if member.__name__ != name:
                doc = f"The same as :meth:`{cls.__name__}.{member.__name__}`."
        body.append(f'<div class="member"><h3 id="{anchor}"><span class="sig">{sig}</span></h3>'
                    f"{render_doc(doc, table)}</div>")
    return "\n".join(body)


def nav():
    links = ['<a href="index.html">space</a>'] + [
        f'<a href="{page_of(m)}">{html.escape(title)}</a>' for m, title in MODULES]
    return "<nav>" + "".join(links) + "</nav>"


def page(title, content):
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n{nav()}\n"
            f"<h1>{html.escape(title)}</h1>\n{content}\n</body></html>\n")


def index(table):
    parts = [render_doc(space.__doc__, table), "<h2>Modules</h2><ul>"]
    for mod, title in MODULES:
        first = (inspect.cleandoc(mod.__doc__ or "").split("\n\n")[0]).replace("\n", " ")
        classes = ", ".join(f'<a href="{table[c.__name__]}"><code>{c.__name__}</code></a>'
                            for c in public_classes(mod))
        parts.append(f'<li><a href="{page_of(mod)}">{html.escape(title)}</a> '
                     f"(<code>{mod.__name__}</code>): {inline(first, table)}<br>{classes}</li>")
    parts.append("</ul>")
    return page(f"space {space.__version__}: the Python SDK", "\n".join(parts))


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    table = symbol_table()
    with open(os.path.join(outdir, "index.html"), "w", encoding="utf-8") as f:
        f.write(index(table))
    for mod, title in MODULES:
        content = render_doc(mod.__doc__, table) + "\n" + "\n".join(
            render_class(c, table) for c in public_classes(mod)) + "\n".join(
            render_function(fn, table) for fn in public_functions(mod))
        with open(os.path.join(outdir, page_of(mod)), "w", encoding="utf-8") as f:
            f.write(page(f"{title} ({mod.__name__})", content))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gendocs.py OUTDIR")
    sys.exit(main(sys.argv[1]))
