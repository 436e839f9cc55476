"""openapi_page.py -- the API reference page generated from docs/api/openapi.yaml.

Every path and method (grouped by tag, an anchor per operation: #op-<operationId>), its
parameters, request body and responses, and every schema (#schema-<Name>). $refs to
parameters, responses, request bodies and headers are resolved in place; a $ref to a schema
is a link to it, and a body whose schema is one is shown with that schema's fields too.
"""

import html
import json
import re

import yaml

METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]
CONSTRAINTS = [("minimum", "min"), ("maximum", "max"), ("exclusiveMinimum", "exclusive min"),
               ("exclusiveMaximum", "exclusive max"), ("minLength", "min length"),
               ("maxLength", "max length"), ("minItems", "min items"), ("maxItems", "max items"),
               ("minProperties", "min properties"), ("maxProperties", "max properties"),
               ("pattern", "pattern"), ("format", "format"), ("default", "default"),
               ("example", "example")]


def esc(value):
    return html.escape(str(value))


def anchor_part(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "x"


def op_anchor(path, method, op):
    if op.get("operationId"):
        return "op-" + anchor_part(op["operationId"])
    return f"op-{method}-{anchor_part(path)}"


class Renderer:
    def __init__(self, spec, markdown_html):
        self.spec = spec
        self.md = markdown_html          # text -> HTML (descriptions are CommonMark)
        self.schemas = spec.get("components", {}).get("schemas", {}) or {}

    # ---- $ref
    def resolve(self, obj, depth=0):
        """A non-schema $ref (parameters, responses, bodies, headers) -> its target."""
        while isinstance(obj, dict) and "$ref" in obj and depth < 20:
            obj = self.lookup(obj["$ref"])
            depth += 1
        return obj

    def lookup(self, ref):
        if not ref.startswith("#/"):
            raise ValueError(f"openapi: external $ref {ref!r} is not supported")
        node = self.spec
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise ValueError(f"openapi: $ref {ref!r} names nothing")
            node = node[part]
        return node

    def schema_name(self, ref):
        prefix = "#/components/schemas/"
        return ref[len(prefix):] if ref.startswith(prefix) else None

    # ---- schemas
    def type_html(self, schema):
        """A one-line summary of a schema's type, with links to named schemas."""
        if not isinstance(schema, dict):
            return "any"
        if "$ref" in schema:
            name = self.schema_name(schema["$ref"])
            if name is None:
                return self.type_html(self.resolve(schema))
            self.lookup(schema["$ref"])
            return f'<a href="#schema-{esc(anchor_part(name))}">{esc(name)}</a>'
        if len(schema.get("allOf") or []) == 1 and "properties" not in schema:
            return self.type_html(schema["allOf"][0])      # a $ref with a description of its own
        for key, word in (("oneOf", "one of"), ("anyOf", "any of"), ("allOf", "all of")):
            if key in schema:
                parts = " | ".join(self.type_html(s) for s in schema[key])
                return f"{word} ({parts})"
        if set(schema) <= {"required", "description"} and schema.get("required"):
            # An alternative that only names which fields must be present.
            names = ", ".join(f"<code>{esc(n)}</code>" for n in schema["required"])
            return f"with {names}"
        t = schema.get("type")
        if isinstance(t, list):
            t = " | ".join(t)
        if t == "array":
            text = f"array of {self.type_html(schema.get('items', {}))}"
        elif t == "object" or (t is None and "properties" in schema):
            text = "object"
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and "properties" not in schema:
                text = f"map of string to {self.type_html(extra)}"
        else:
            text = esc(t or "any")
        if schema.get("nullable"):
            text += " | null"
        return text

    def facts(self, schema):
        """Enum values and constraints, as a short line."""
        if not isinstance(schema, dict):
            return ""
        out = []
        if "enum" in schema:
            out.append("one of " + ", ".join(f"<code>{esc(_json(v))}</code>" for v in schema["enum"]))
        for key, word in CONSTRAINTS:
            if key in schema:
                out.append(f"{word} <code>{esc(_json(schema[key]))}</code>")
        if schema.get("readOnly"):
            out.append("read-only")
        if schema.get("additionalProperties") is False and "properties" in schema:
            out.append("no other fields")
        return "; ".join(out)

    def describe(self, schema):
        text = schema.get("description") if isinstance(schema, dict) else None
        return self.md(text) if text else ""

    def fields_table(self, schema, depth):
        props = schema.get("properties") or {}
        if not props:
            return ""
        required = set(schema.get("required") or [])
        rows = []
        for name, sub in props.items():
            req = ' <span class="required">required</span>' if name in required else ""
            facts = self.facts(sub)
            nested = ""
            if isinstance(sub, dict) and "$ref" not in sub and depth < 4:
                nested = self.body(sub, depth + 1, with_description=False)
            desc = self.describe(sub)
            rows.append(f"<tr><td><code>{esc(name)}</code>{req}</td><td>{self.type_html(sub)}</td>"
                        f"<td>{desc}{f'<p class=facts>{facts}</p>' if facts else ''}{nested}</td></tr>")
        return ('<table class="fields"><thead><tr><th>field</th><th>type</th><th>meaning</th></tr>'
                "</thead><tbody>" + "".join(rows) + "</tbody></table>")

    def body(self, schema, depth=0, with_description=True):
        """A schema's details: description, fields, items, alternatives (nested, bounded)."""
        if not isinstance(schema, dict) or "$ref" in schema:
            return ""
        out = []
        if with_description:
            out.append(self.describe(schema))
        out.append(self.fields_table(schema, depth))
        items = schema.get("items")
        if isinstance(items, dict) and "$ref" not in items and depth < 4:
            inner = self.body(items, depth + 1)
            if inner:
                out.append(f'<div class="items"><p>Each item:</p>{inner}</div>')
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and "$ref" not in extra and "properties" in extra and depth < 4:
            out.append(f'<div class="items"><p>Each value:</p>{self.body(extra, depth + 1)}</div>')
        for key, word in (("oneOf", "One of"), ("anyOf", "Any of"), ("allOf", "All of")):
            if key in schema and not (key == "allOf" and len(schema[key]) == 1):
                alts = "".join(f"<li>{self.type_html(s)}{self.body(s, depth + 1)}</li>"
                               for s in schema[key])
                out.append(f"<p>{word}:</p><ul class=alternatives>{alts}</ul>")
        return "".join(out)

    def schema_block(self, schema, expand=True):
        """A body's schema: its type line, and (expand) the fields of a named schema."""
        line = f'<p class="schema-type">Schema: {self.type_html(schema)}</p>'
        facts = self.facts(schema)
        if facts:
            line += f"<p class=facts>{facts}</p>"
        if isinstance(schema, dict) and "$ref" in schema and self.schema_name(schema["$ref"]):
            if not expand:
                return line
            target = self.lookup(schema["$ref"])
            return line + self.body(target, 1, with_description=False)
        return line + self.body(schema, 1, with_description=False)

    # ---- operations
    def parameters(self, path_item, op):
        merged = {}
        for p in (path_item.get("parameters") or []) + (op.get("parameters") or []):
            p = self.resolve(p)
            merged[(p.get("name"), p.get("in"))] = p
        if not merged:
            return ""
        rows = []
        for p in merged.values():
            req = ' <span class="required">required</span>' if p.get("required") else ""
            schema = p.get("schema", {})
            facts = self.facts(schema)
            rows.append(f"<tr><td><code>{esc(p.get('name'))}</code>{req}</td><td>{esc(p.get('in'))}</td>"
                        f"<td>{self.type_html(schema)}</td><td>{self.describe(p)}"
                        f"{f'<p class=facts>{facts}</p>' if facts else ''}</td></tr>")
        return ('<h4>Parameters</h4><table class="params"><thead><tr><th>name</th><th>in</th>'
                "<th>type</th><th>meaning</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")

    def content(self, content, expand=True):
        out = []
        for ctype, media in (content or {}).items():
            media = media or {}
            out.append(f'<div class="media"><p class="ctype"><code>{esc(ctype)}</code></p>')
            if "schema" in media:
                out.append(self.schema_block(media["schema"], expand))
            if "example" in media:
                out.append(f"<pre class=example><code>{esc(_json(media['example']))}</code></pre>")
            out.append("</div>")
        return "".join(out)

    def request_body(self, op):
        if "requestBody" not in op:
            return ""
        rb = self.resolve(op["requestBody"])
        req = ' <span class="required">required</span>' if rb.get("required") else ""
        return f"<h4>Request body{req}</h4>{self.describe(rb)}{self.content(rb.get('content'))}"

    def responses(self, op):
        rows = []
        for code, resp in (op.get("responses") or {}).items():
            named = ""
            if isinstance(resp, dict) and "$ref" in resp:
                named = f' <span class="named">({esc(resp["$ref"].rsplit("/", 1)[-1])})</span>'
            resp = self.resolve(resp)
            headers = ""
            for hname, h in (resp.get("headers") or {}).items():
                h = self.resolve(h)
                headers += (f"<p>Header <code>{esc(hname)}</code>: {self.type_html(h.get('schema', {}))}"
                            f"</p>{self.describe(h)}")
            rows.append(f"<tr><td><code>{esc(code)}</code>{named}</td><td>{self.describe(resp)}"
                        f"{headers}{self.content(resp.get('content'), str(code).startswith('2'))}</td></tr>")
        return ('<h4>Responses</h4><table class="responses"><thead><tr><th>status</th>'
                "<th>answer</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")

    def security(self, op):
        sec = op.get("security", self.spec.get("security"))
        if sec is None:
            return ""
        if not sec:
            return '<p class="auth">Authentication: none.</p>'
        names = [" + ".join(f'<a href="#auth-{esc(anchor_part(n))}">{esc(n)}</a>' for n in req)
                 or "none" for req in sec]
        return f'<p class="auth">Authentication: {" or ".join(names)}.</p>'

    def servers(self, path_item, op):
        servers = op.get("servers") or path_item.get("servers")
        if not servers:
            return ""
        items = ", ".join(f"<code>{esc(s.get('url'))}</code>"
                          + (f" ({esc(s['description'])})" if s.get("description") else "")
                          for s in servers)
        return f'<p class="servers">Served on: {items}.</p>'

    def operation(self, path, method, path_item, op):
        anchor = op_anchor(path, method, op)
        title = (f'<span class="method method-{method}">{method.upper()}</span> '
                 f'<code class="path">{esc(path)}</code>')
        summary = f'<p class="summary">{esc(op["summary"])}</p>' if op.get("summary") else ""
        deprecated = '<p class="deprecated">Deprecated.</p>' if op.get("deprecated") else ""
        return (f'<section class="operation" id="{anchor}"><h3><a class="self" href="#{anchor}">'
                f"{title}</a></h3>{summary}{deprecated}{self.describe(op)}"
                f"{self.security(op)}{self.servers(path_item, op)}{self.parameters(path_item, op)}"
                f"{self.request_body(op)}{self.responses(op)}</section>")

    def operations(self):
        """(tag, path, method, path item, operation) for every operation, in file order."""
        out = []
        for path, item in (self.spec.get("paths") or {}).items():
            item = self.resolve(item) or {}
            for method in METHODS:
                if isinstance(item.get(method), dict):
                    op = item[method]
                    tag = (op.get("tags") or ["other"])[0]
                    out.append((tag, path, method, item, op))
        return out

    # ---- the page
    def intro(self):
        info = self.spec.get("info", {})
        out = [f'<h1 id="top">{esc(info.get("title", "API"))} {esc(info.get("version", ""))}</h1>',
               '<p>Generated from <a href="openapi.yaml">openapi.yaml</a> (OpenAPI '
               f'{esc(self.spec.get("openapi", "?"))}). The prose reference is '
               '<a href="reference.html">reference.html</a>.</p>', self.describe(info)]
        servers = self.spec.get("servers") or []
        if servers:
            out.append("<h2 id=\"servers\">Servers</h2><ul>" + "".join(
                f"<li><code>{esc(s.get('url'))}</code> {esc(s.get('description', ''))}</li>"
                for s in servers) + "</ul>")
        schemes = self.spec.get("components", {}).get("securitySchemes") or {}
        if schemes:
            out.append('<h2 id="authentication">Authentication</h2><dl class="auth-schemes">')
            for name, s in schemes.items():
                s = self.resolve(s)
                how = esc(s.get("type", ""))
                if s.get("scheme"):
                    how += f" {esc(s['scheme'])}"
                if s.get("in"):
                    how += f" in {esc(s['in'])} <code>{esc(s.get('name', ''))}</code>"
                out.append(f'<dt id="auth-{esc(anchor_part(name))}"><code>{esc(name)}</code> ({how})</dt>'
                           f"<dd>{self.describe(s)}</dd>")
            out.append("</dl>")
        return "".join(out)

    def contents(self, groups, tags):
        out = ['<h2 id="operations">Operations</h2><ul class="op-index">']
        for tag in groups:
            ops = "".join(f'<li><a href="#{op_anchor(p, m, op)}"><span class="method method-{m}">'
                          f'{m.upper()}</span> <code>{esc(p)}</code></a></li>'
                          for p, m, _i, op in groups[tag])
            out.append(f'<li><a href="#tag-{esc(anchor_part(tag))}">{esc(tag)}</a><ul>{ops}</ul></li>')
        out.append('<li><a href="#schemas">Schemas</a></li></ul>')
        return "".join(out)

    def render(self):
        tags = {t["name"]: t for t in self.spec.get("tags") or [] if isinstance(t, dict) and "name" in t}
        groups = {name: [] for name in tags}
        for tag, path, method, item, op in self.operations():
            groups.setdefault(tag, []).append((path, method, item, op))
        groups = {k: v for k, v in groups.items() if v}
        out = [self.intro(), self.contents(groups, tags)]
        for tag, ops in groups.items():
            desc = self.describe(tags.get(tag, {}))
            out.append(f'<h2 id="tag-{esc(anchor_part(tag))}" class="tag">{esc(tag)}</h2>{desc}')
            out += [self.operation(p, m, item, op) for p, m, item, op in ops]
        out.append('<h2 id="schemas">Schemas</h2>')
        for name, schema in self.schemas.items():
            a = f"schema-{anchor_part(name)}"
            facts = self.facts(schema)
            out.append(f'<section class="schema" id="{a}"><h3><a class="self" href="#{a}">{esc(name)}</a>'
                       f'</h3><p class="schema-type">{self.type_html(schema)}</p>'
                       f"{f'<p class=facts>{facts}</p>' if facts else ''}{self.body(schema)}</section>")
        return "".join(out)


def _json(value):
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def render(path, markdown_html):
    """openapi.yaml at path -> (title, HTML body of its page)."""
    with open(path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    if not isinstance(spec, dict) or "paths" not in spec:
        raise ValueError(f"{path}: not an OpenAPI document (no paths)")
    r = Renderer(spec, markdown_html)
    return "API reference (OpenAPI)", r.render()


def operation_anchors(spec):
    """Every operation's anchor: for the tests, which check that each has its section."""
    return [op_anchor(p, m, op) for _t, p, m, _i, op in Renderer(spec, lambda t: "").operations()]
