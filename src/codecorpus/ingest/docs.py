"""Documentation trees: which files are docs, and HTML -> readable text.

Markdown, reStructuredText, AsciiDoc, Org and plain text are kept as written
(their markup is the structure). HTML is converted with the standard library's
parser to Markdown-like text: headings become ``#`` lines, list items ``- ``,
``<pre>`` blocks fenced code, links keep their target, and script/style/nav
content is dropped. A full HTML-to-Markdown converter (markdownify, html2text)
would render tables better; this keeps the dependency list short and is
deterministic.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

DOC_SUFFIXES = (
    ".md", ".markdown", ".mdx", ".rst", ".rest", ".adoc", ".asciidoc", ".asc", ".txt", ".text",
    ".org", ".html", ".htm", ".xhtml", ".textile", ".pod", ".rdoc", ".tex",
)
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
_SKIP = {"script", "style", "nav", "head", "noscript", "svg", "template"}
_BLOCK = {"p", "div", "section", "article", "table", "tr", "blockquote", "dl", "dd", "dt",
          "header", "footer", "main", "figure", "ul", "ol", "br", "hr"}


def is_doc(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith(DOC_SUFFIXES) or name in ("readme", "changelog", "license", "authors")


def is_html(path: str) -> bool:
    return path.lower().endswith(HTML_SUFFIXES)


class _Converter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.pre = 0
        self.href: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "pre":
            self.pre += 1
            self.out.append("\n\n```\n")
        elif tag == "code" and not self.pre:
            self.out.append("`")
        elif tag == "a":
            self.href.append(dict(attrs).get("href"))
        elif tag in ("td", "th"):
            self.out.append(" | ")
        elif tag in _BLOCK:
            self.out.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.out.append("```\n\n" if "".join(self.out[-1:]).endswith("\n") else "\n```\n\n")
        elif tag == "code" and not self.pre:
            self.out.append("`")
        elif tag == "a" and self.href:
            href = self.href.pop()
            if href and not href.startswith(("#", "javascript:")):
                self.out.append(f" ({href})")
        elif tag in _BLOCK or (tag.startswith("h") and tag[1:].isdigit()):
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        self.out.append(data if self.pre else " ".join(data.split()) + (" " if data[-1:].isspace() else ""))


def html_to_text(html: str) -> str:
    """Readable text of an HTML page, structure kept.

    >>> html_to_text("<html><head><title>t</title></head><body><h1>Guide</h1>"
    ...              "<p>Use <code>f()</code>.</p><ul><li>one</li></ul><pre>x = 1\\n</pre></body></html>")
    '# Guide\\n\\nUse `f()`.\\n\\n- one\\n\\n```\\nx = 1\\n```\\n'
    """
    conv = _Converter()
    conv.feed(html)
    conv.close()
    text = "\n".join(line.rstrip() for line in "".join(conv.out).splitlines())
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
