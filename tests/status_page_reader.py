"""The AM's status page (``/``) read back with the standard library's HTML parser, for
the unit tests (the page rendered) and the end-to-end ones (a live run's page, as served
and as Chromium built its DOM)."""
from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """The elements opened, each gang row's cells as text, each why row's text, the meta refresh."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[tuple[str, list[str]]] = []   # (the row's class, its cells' text)
        self.refresh: str | None = None
        self._row: list[str] | None = None
        self._in_cell = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "meta" and attrs.get("http-equiv") == "refresh":
            self.refresh = attrs["content"]
        elif tag == "tr" and (attrs.get("class") or "").split()[:1] in (["gang"], ["why"]):
            self._row = []
            self.rows.append((attrs["class"], self._row))
        elif tag == "td" and self._row is not None:
            self._row.append("")
            self._in_cell = True

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_cell = False
        elif tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._in_cell and self._row is not None:
            self._row[-1] += data
