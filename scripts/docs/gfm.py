"""gfm.py -- bring GitHub-style markdown to what Python-Markdown reads the same way.

The docs are written for GitHub's renderer; Python-Markdown (python3-markdown) differs in
three places that these docs hit, each fixed here on the source text before conversion:

- a list right after a paragraph line (no blank line between) is a list on GitHub, and part
  of the paragraph for Python-Markdown: a blank line is put before it;
- nested lists indented by 2 spaces are nested on GitHub; Python-Markdown needs 4: inside a
  list, leading indentation is doubled;
- a fenced code block inside a list item is not a fence for Python-Markdown: it becomes an
  indented code block (indented 4 past its item's content).

Fenced code blocks at the top level are passed through untouched.
"""

import re

LIST_ITEM = re.compile(r"^( *)([-*+]|\d+[.)])( +|$)")
FENCE = re.compile(r"^( *)(```+|~~~+)")


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _is_item(line):
    return LIST_ITEM.match(line) is not None


def _ends_list(line):
    """A non-blank line at column 0 that is not a list item ends the list it follows."""
    return line.strip() != "" and _indent(line) == 0 and not _is_item(line)


def _fence_end(lines, start, marker, indent):
    """Index of the line closing the fence opened at lines[start] (len(lines) when unclosed)."""
    for j in range(start + 1, len(lines)):
        m = FENCE.match(lines[j])
        if m and m.group(2).startswith(marker[0] * 3) and len(m.group(2)) >= len(marker) \
                and lines[j].strip() == m.group(2) and _indent(lines[j]) <= indent + 3:
            return j
    return len(lines)


def _code_in_list(lines, start, end, indent):
    """A fence inside a list item as an indented code block, blank lines around it."""
    pad = " " * (2 * indent + 4)
    body = []
    for line in lines[start + 1:end]:
        cut = min(indent, _indent(line))
        body.append(pad + line[cut:] if line.strip() else "")
    return [""] + body + [""]


def normalize(text):
    """GitHub-flavoured markdown text -> text Python-Markdown renders the same way."""
    lines = text.split("\n")
    out = []
    in_list = False
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            indent = len(fence.group(1))
            end = _fence_end(lines, i, fence.group(2), indent)
            if in_list and indent > 0:
                out.extend(_code_in_list(lines, i, end, indent))
            else:
                in_list = False
                out.extend(lines[i:end + 1])
            i = end + 1
            continue
        if _is_item(line):
            prev = out[-1] if out else ""
            if not in_list and prev.strip() and not prev.startswith("|"):
                out.append("")
            in_list = True
        elif in_list and _ends_list(line):
            in_list = False
        if in_list and line.strip():
            line = " " * (2 * _indent(line)) + line.lstrip(" ")
        out.append(line)
        i += 1
    return "\n".join(out)
