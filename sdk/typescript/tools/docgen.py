#!/usr/bin/python3
"""docgen.py -- the TypeScript SDK's reference as static HTML, read from src/*.ts alone.

usage: docgen.py SRC_DIR OUT_DIR

What index.ts exports is documented: each exported class, interface, type, function and
constant of the modules it re-exports, with its JSDoc comment, and for classes and interfaces
each public member (not `private`, not `#x`, not `@internal`). The pages are one per module
(client.html, sandbox.html, ...) plus index.html; every link is relative and stays inside
OUT_DIR. Python's standard library only: the docs site builds from Debian packages alone.

It is a scanner, not a TypeScript parser: strings, template literals, regular expressions and
comments are masked out, then declarations are found by their keywords at brace depth 0 and
their extent by matching brackets. That covers the style src/ is written in (semicolons after
members, no object-literal return types on exported functions outside angle brackets)."""

import html
import os
import re
import sys

# ---------------------------------------------------------------- masking


def mask(src):
    """(masked, docs): src with every string, template, regex and comment replaced by spaces
    (newlines kept, so offsets and lines stay), and {end offset: text} of the JSDoc comments."""
    out = list(src)
    docs = {}
    i, n = 0, len(src)
    prev = ""  # the last significant character of code, for telling a regex from a division
    stack = []  # brace depths at which a template literal's ${ ... } resumes the template

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    depth = 0
    while i < n:
        c = src[i]
        if c == "/" and src.startswith("/*", i):
            end = src.find("*/", i + 2)
            end = n if end < 0 else end + 2
            if src.startswith("/**", i) and not src.startswith("/**/", i):
                docs[end] = src[i:end]
            blank(i, end)
            i = end
            continue
        if c == "/" and src.startswith("//", i):
            end = src.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
            continue
        if c in "'\"":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
            prev = c
            continue
        if c == "`" or (c == "}" and stack and stack[-1] == depth):
            if c == "}":
                stack.pop()
                out[i] = " "  # the } closing a ${ ... } is the template's, not code's
            j = i + 1
            while j < n:
                if src[j] == "\\":
                    j += 2
                    continue
                if src[j] == "`":
                    break
                if src.startswith("${", j):
                    break
                j += 1
            blank(i + 1, j)
            if j < n and src[j] == "`":
                i = j + 1
            else:  # ${: code until the matching }
                stack.append(depth)
                blank(j, j + 2)
                i = j + 2
            prev = "`"
            continue
        if c == "/" and (prev == "" or prev in "(,=:[!&|?{};+-*%<>~^"):
            j, in_class = i + 1, False
            while j < n and src[j] != "\n":
                if src[j] == "\\":
                    j += 2
                    continue
                if src[j] == "[":
                    in_class = True
                elif src[j] == "]":
                    in_class = False
                elif src[j] == "/" and not in_class:
                    break
                j += 1
            blank(i + 1, j)
            i = j + 1
            while i < n and src[i].isalpha():  # flags
                i += 1
            prev = "/"
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if not c.isspace():
            prev = c if not (c.isalnum() or c in "_$") else "a"
        i += 1
    return "".join(out), docs


def match_close(m, i):
    """Offset just past the bracket that closes the one at m[i]."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    stack = []
    for j in range(i, len(m)):
        c = m[j]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")]}":
            if stack and stack[-1] == c:
                stack.pop()
                if not stack:
                    return j + 1
    return len(m)


def doc_before(src, docs, i):
    """The JSDoc comment that ends right before offset i (only blanks between), else None."""
    j = i
    while j > 0 and src[j - 1].isspace():
        j -= 1
    return docs.get(j)


def scan_end(m, i, method_like):
    """Where a member or a type alias starting at i ends: past its `;`, or past its body."""
    paren = angle = 0
    seen_params = False
    j = i
    while j < len(m):
        c = m[j]
        if c in "([":
            if c == "(" and paren == 0 and angle == 0:
                seen_params = True
            j = match_close(m, j)
            continue
        if c == "<":
            angle += 1
        elif c == ">" and m[j - 1] != "=":
            angle = max(0, angle - 1)
        elif c == "{":
            if method_like and seen_params and angle == 0:
                return j, match_close(m, j)  # signature ends here; body skipped
            j = match_close(m, j)
            continue
        elif c == ";" and angle == 0:
            return j, j + 1
        elif c == "}":  # the enclosing body ends (a last member without `;`)
            return j, j
        j += 1
    return j, j


# ---------------------------------------------------------------- declarations

DECL = re.compile(r"export\s+(?:declare\s+)?(?:(abstract)\s+)?(class|interface|type|function\*?|async\s+function\*?|const|let|enum)\b\s*\*?\s*([A-Za-z_$][\w$]*)")


class Decl:
    def __init__(self, module, kind, name, sig, doc, members=()):
        self.module, self.kind, self.name, self.sig, self.doc = module, kind, name, sig, doc
        self.members = list(members)


def squeeze(s):
    s = re.sub(r"\s+", " ", s).strip()
    return re.sub(r"([(<\[]) ", r"\1", re.sub(r" ([)>\],;])", r"\1", s))


def members_of(src, m, docs, open_brace, close_brace, is_interface):
    """Public members of a class or interface body: (name, signature, doc)."""
    out = []
    i = open_brace + 1
    while i < close_brace - 1:
        while i < close_brace and m[i].isspace():
            i += 1
        if i >= close_brace - 1:
            break
        head = m[i:i + 200]
        word = re.match(r"((?:(?:public|private|protected|readonly|static|async|abstract|override|declare|get|set)\s+)*)(\*?\s*#?[\w$]+|\[[^\]]*\])\s*([?!]?)\s*([(<:=;]?)", head)
        method_like = True
        if word:
            nxt = word.group(4)
            method_like = nxt in ("(", "<") or (word.group(2).startswith("[") and nxt == "(")
            if nxt in (":", "=", ";", "") and not word.group(2).startswith("["):
                method_like = False
            if word.group(2).startswith("[") and nxt == ":":
                method_like = False
        sig_end, end = scan_end(m, i, method_like)
        if end <= i:
            break
        text = src[i:sig_end]
        doc = doc_before(src, docs, i)
        i = end
        if not word:
            continue
        mods, name = word.group(1) or "", word.group(2).strip().lstrip("*").strip()
        if "private" in mods.split() or "protected" in mods.split() or name.startswith("#"):
            continue
        if doc and "@internal" in doc:
            continue
        if not doc and not is_interface and name != "constructor":
            doc = None
        # A constructor's parameter properties: `private readonly t: Transport` is not the user's business.
        if name == "constructor" and doc is None:
            continue
        sig = squeeze(re.sub(r"\s*=\s*[^,()]*?(?=[,)])", "", text) if name == "constructor" else text)
        sig = re.sub(r"\b(?:private|protected)\s+(?:readonly\s+)?", "", sig)
        out.append((name, sig, doc))
    return out


def declarations(module, src):
    m, docs = mask(src)
    decls = []
    depth = 0
    i = 0
    while i < len(m):
        c = m[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0 and m.startswith("export", i) and (i == 0 or not (m[i - 1].isalnum() or m[i - 1] in "_$")):
            d = DECL.match(m, i)
            if not d:
                i += 6
                continue
            kind = d.group(2).replace("async", "").replace("*", "").strip()
            kind = re.sub(r"\s+", " ", kind)
            name = d.group(3)
            doc = doc_before(src, docs, i)
            if kind in ("class", "interface", "enum"):
                brace = m.find("{", d.end())
                close = match_close(m, brace)
                sig = squeeze(src[i:brace].replace("export ", "", 1))
                mem = members_of(src, m, docs, brace, close, kind == "interface")
                decls.append(Decl(module, kind, name, sig, doc, mem))
                i = close
                continue
            if kind == "function":
                sig_end, end = scan_end(m, d.end(), True)
                decls.append(Decl(module, kind, name, squeeze(src[i:sig_end].replace("export ", "", 1)), doc))
                i = end
                continue
            sig_end, end = scan_end(m, d.end(), False)
            text = src[i:sig_end].replace("export ", "", 1)
            if kind in ("const", "let") and len(squeeze(text)) > 120:
                text = text.split("=", 1)[0]
            decls.append(Decl(module, kind, name, squeeze(text), doc))
            i = end
            continue
        i += 1
    return decls


def public_names(index_src):
    """{module file: set of names, or None for `export *`} from index.ts's re-exports."""
    m, _ = mask(index_src)
    out = {}
    for mm in re.finditer(r"export\s+(type\s+)?(\*|\{([^}]*)\})\s+from\s+(['\"])", m):
        q = mm.end()
        end = index_src.find(index_src[q - 1], q)
        mod = os.path.basename(index_src[q:end]).replace(".js", ".ts")
        if mm.group(2) == "*":
            out[mod] = None
        else:
            names = {re.sub(r"^type\s+", "", x.strip()).split(" as ")[-1].strip() for x in mm.group(3).split(",") if x.strip()}
            out.setdefault(mod, set())
            if out[mod] is not None:
                out[mod] |= names
    return out


def file_summary(src):
    """The file's opening line comment: `/* name.ts -- what it is for */`."""
    mm = re.match(r"\s*/\*\s*[\w.]+\s+--\s+(.*?)\s*\*/", src, re.S)
    return re.sub(r"\s+", " ", mm.group(1)) if mm else ""


# ---------------------------------------------------------------- HTML

CSS = """body{font:15px/1.5 system-ui,sans-serif;max-width:980px;margin:0 auto;padding:0 1em 4em;color:#1b1f24}
a{color:#0a58ca;text-decoration:none}a:hover{text-decoration:underline}
nav{padding:.8em 0;border-bottom:1px solid #d0d7de;margin-bottom:1em}nav a{margin-right:1em}
code,pre{font:13px/1.45 ui-monospace,monospace}pre{background:#f6f8fa;padding:.7em;overflow:auto;border-radius:4px}
pre.sig{background:#eef3f8;border-left:3px solid #0a58ca}h2{border-top:1px solid #d0d7de;padding-top:.8em;margin-top:2em}
h3{font-size:1em;margin:1.4em 0 .3em}.kind{color:#57606a;font-weight:normal;font-size:.85em}
.member{margin-left:1.2em}table{border-collapse:collapse}td{padding:.15em .8em .15em 0;vertical-align:top}
table.fields{width:100%}table.fields td{border-top:1px solid #eaeef2;padding:.35em .8em .35em 0}table.fields td p{margin:0}
table.fields td:first-child{width:40%}"""


class Site:
    def __init__(self, decls):
        self.by_name = {}
        for d in decls:
            self.by_name[d.name] = d
            for name, _, _ in d.members:
                self.by_name.setdefault(f"{d.name}.{name}", (d, name))

    def href(self, ref):
        t = self.by_name.get(ref)
        if t is None:
            return None
        if isinstance(t, tuple):
            return f"{page(t[0].module)}#{t[0].name}.{t[1]}"
        return f"{page(t.module)}#{t.name}"

    def code_links(self, text):
        """Escaped code with every known exported name linked to its declaration."""
        out = []
        for tok in re.split(r"([A-Za-z_$][\w$]*)", text):
            h = self.href(tok) if re.fullmatch(r"[A-Za-z_$][\w$]*", tok or "") else None
            t = html.escape(tok)
            out.append(f'<a href="{h}">{t}</a>' if h else t)
        return "".join(out)

    def inline(self, text):
        """JSDoc prose: `code`, {@link X} / {@link X.y}, paragraphs."""
        parts = re.split(r"(`[^`]*`|\{@link\s+[^}\s]+(?:\s+[^}]*)?\})", text)
        out = []
        for p in parts:
            if p.startswith("`") and p.endswith("`") and len(p) > 1:
                out.append(f"<code>{self.code_links(p[1:-1])}</code>")
            elif p.startswith("{@link"):
                mm = re.match(r"\{@link\s+([^}\s]+)\s*([^}]*)\}", p)
                ref, label = mm.group(1), mm.group(2) or mm.group(1)
                h = self.href(ref)
                out.append(f'<a href="{h}"><code>{html.escape(label)}</code></a>' if h else f"<code>{html.escape(label)}</code>")
            else:
                out.append(html.escape(p))
        return "".join(out)

    def doc_html(self, doc):
        if not doc:
            return ""
        body = doc[3:-2]
        lines = [re.sub(r"^\s*\* ?", "", ln) for ln in body.split("\n")]
        text = "\n".join(lines).strip("\n")
        # Split off tags.
        chunks = re.split(r"\n?^(?=@\w+)", text, flags=re.M) if "@" in text else [text]
        prose, tags = chunks[0] if not chunks[0].startswith("@") else "", [c for c in chunks if c.startswith("@")]
        if chunks[0].startswith("@"):
            tags = chunks
        out = []
        for para in re.split(r"\n\s*\n", prose.strip()):
            if para.strip():
                out.append(f"<p>{self.inline(' '.join(x.strip() for x in para.splitlines()))}</p>")
        params = []
        for t in tags:
            tag, _, rest = t.partition(" ")
            tag = tag.strip()
            if "\n" in tag:
                tag, rest = tag.split("\n", 1)[0], t.split("\n", 1)[1]
            if tag == "@example":
                out.append(f"<pre>{html.escape(rest.strip(chr(10)).rstrip())}</pre>")
            elif tag == "@param":
                name, _, what = rest.partition(" ")
                params.append(f"<tr><td><code>{html.escape(name)}</code></td><td>{self.inline(' '.join(what.split()))}</td></tr>")
            elif tag == "@returns":
                out.append(f"<p><b>Returns</b> {self.inline(' '.join(rest.split()))}</p>")
        if params:
            out.insert(1 if out else 0, "<table>" + "".join(params) + "</table>")
        return "\n".join(out)


def page(module):
    return module.replace(".ts", ".html")


def head(title, modules, here):
    nav = " ".join(f'<a href="{page(m)}"{" aria-current=page" if page(m) == here else ""}>{m[:-3]}</a>' for m in modules)
    return (f"<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{CSS}</style></head><body>\n"
            f'<nav><a href="index.html"><b>SPACE TypeScript SDK</b></a> {nav}</nav>\n')


def render_decl(site, d):
    out = [f'<h2 id="{d.name}">{html.escape(d.name)} <span class=kind>{d.kind}</span></h2>',
           f"<pre class=sig>{site.code_links(d.sig)}</pre>", site.doc_html(d.doc)]
    if d.kind == "interface" and d.members:  # fields: one compact table
        rows = "".join(f'<tr id="{d.name}.{html.escape(name)}"><td><code>{site.code_links(sig)}</code></td>'
                       f"<td>{site.doc_html(doc)}</td></tr>" for name, sig, doc in d.members)
        out.append(f"<table class=fields>{rows}</table>")
        return "\n".join(x for x in out if x)
    seen = {}
    for name, sig, doc in d.members:
        # An overloaded method has one heading per signature: the first keeps the plain id
        # (what links name), the others get -2, -3 ...
        n = seen[name] = seen.get(name, 0) + 1
        anchor = f"{d.name}.{html.escape(name)}" + (f"-{n}" if n > 1 else "")
        out.append(f'<div class=member><h3 id="{anchor}"><a href="#{anchor}">'
                   f"{html.escape(d.name)}.{html.escape(name)}</a></h3>"
                   f"<pre class=sig>{site.code_links(sig)}</pre>{site.doc_html(doc)}</div>")
    return "\n".join(x for x in out if x)


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: docgen.py SRC_DIR OUT_DIR")
    src_dir, out_dir = argv[1], argv[2]
    with open(os.path.join(src_dir, "index.ts"), encoding="utf-8") as fh:
        exported = public_names(fh.read())
    modules, decls, summaries = [], [], {}
    for mod in sorted(exported):
        with open(os.path.join(src_dir, mod), encoding="utf-8") as fh:
            src = fh.read()
        names = exported[mod]
        found = [d for d in declarations(mod, src) if names is None or d.name in names]
        missing = (names or set()) - {d.name for d in found}
        if missing:
            sys.exit(f"docgen: {mod}: exported by index.ts but not found: {sorted(missing)}")
        modules.append(mod)
        decls += found
        summaries[mod] = file_summary(src)
    site = Site(decls)
    os.makedirs(out_dir, exist_ok=True)
    order = ["client.ts", "sandbox.ts", "commands.ts", "files.ts", "ports.ts", "builds.ts", "operations.ts", "errors.ts", "config.ts", "types.ts"]
    modules.sort(key=lambda m: (order.index(m) if m in order else len(order), m))
    for mod in modules:
        body = [head(f"{mod[:-3]} — SPACE TypeScript SDK", modules, page(mod)),
                f"<h1>{html.escape(mod[:-3])}</h1><p>{html.escape(summaries[mod])}</p>", "<ul>"]
        mine = [d for d in decls if d.module == mod]
        body += [f'<li><a href="#{d.name}">{html.escape(d.name)}</a> <span class=kind>{d.kind}</span></li>' for d in mine]
        body.append("</ul>")
        body += [render_decl(site, d) for d in mine]
        body.append("</body></html>\n")
        with open(os.path.join(out_dir, page(mod)), "w", encoding="utf-8") as fh:
            fh.write("\n".join(body))
    client = site.by_name.get("Client")
    intro = site.doc_html(client.doc) if isinstance(client, Decl) else ""
    idx = [head("SPACE TypeScript SDK — reference", modules, "index.html"),
           "<h1>SPACE TypeScript SDK</h1>",
           "<p>The reference of <code>@space/sdk</code> (sdk/typescript), generated from its source: every "
           "exported declaration and its documentation comment. The package uses <code>fetch</code> only "
           "and has no runtime dependencies; it is ESM with type declarations.</p>",
           "<h2 id=start>Start</h2>", intro, "<h2 id=modules>Modules</h2><table>"]
    for mod in modules:
        names = ", ".join(f'<a href="{page(mod)}#{d.name}">{html.escape(d.name)}</a>' for d in decls if d.module == mod)
        idx.append(f'<tr><td><a href="{page(mod)}"><b>{html.escape(mod[:-3])}</b></a></td>'
                   f"<td>{html.escape(summaries[mod])}<br>{names}</td></tr>")
    idx.append("</table></body></html>\n")
    with open(os.path.join(out_dir, "index.html"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(idx))
    print(f"docgen: {len(decls)} declarations, {sum(len(d.members) for d in decls)} members, "
          f"{len(modules) + 1} pages in {out_dir}")


if __name__ == "__main__":
    main(sys.argv)
