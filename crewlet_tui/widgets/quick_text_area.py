"""The editor for a large page: Textual's TextArea, plain text, minus three costs that grow with the page.

Measured on a 5.5 MB page of 100,000 lines (bench/large_pages.py), Textual 8's TextArea spent, at each key:
the wrapped document's height summed over every line, once per row drawn (about 1 s a key); the whole text
joined once per row drawn, only to ask whether it is empty (for the placeholder); and at open, the whole
document wrapped again each time anything asked for a wrap at a width it already had (seven times, 19 s).
Here the height is the length of the row table the wrapper already keeps, the emptiness is asked of the
document's first line, and a wrap at the width already wrapped is skipped (edits keep it current through
`wrap_range`, as in Textual). Everything else — keys, selection, undo, soft wrap — is Textual's own.

This leans on TextArea's internals (textual>=8,<9 in pyproject.toml): tests/test_app_large_pages.py opens a
large page, types in it and saves it, so a Textual that moves them fails there first.
"""
from __future__ import annotations

from rich.cells import cell_len
from textual._wrap import compute_wrap_offsets
from textual.document._document import Document
from textual.document._document_navigator import DocumentNavigator
from textual.document._wrapped_document import WrappedDocument
from textual.expand_tabs import get_tab_widths
from textual.strip import Strip
from textual.widgets import TextArea


class _QuickWrap(WrappedDocument):
    _wrapped_at: tuple[int, int] | None = None

    def wrap(self, width: int, tab_width: int | None = None) -> None:
        key = (width, tab_width or self._tab_width)
        if key == self._wrapped_at:   # wrapped at this width already, and every edit since through wrap_range
            return
        self._wrap_all(width, tab_width)
        self._wrapped_at = key

    def _wrap_all(self, width: int, tab_width: int | None) -> None:
        """WrappedDocument.wrap, with the common line — no tab, narrower than the width — filled in directly
        (Textual measures and splits every line: about 15 µs a line, 1.5 s per wrap at 100,000 lines, and a
        new editor wraps four or five times as its width settles)."""
        self._width = width
        if tab_width:
            self._tab_width = tab_width
        tab_width = self._tab_width
        wrap_offsets_of: list[list[int]] = []
        line_info: list[tuple[int, int]] = []
        offsets_of: list[list[int]] = []
        tab_widths_of: list[list[int]] = []
        row = 0
        for index, line in enumerate(self.document.lines):
            if "\t" not in line and (not width or len(line) <= width and (line.isascii() or cell_len(line) <= width)):
                wrap_offsets_of.append([])
                tab_widths_of.append([0] if line else [])
                offsets_of.append([row])
                line_info.append((index, 0))
                row += 1
                continue
            sections = get_tab_widths(line, tab_width)
            offsets = compute_wrap_offsets(line, width, tab_size=tab_width, precomputed_tab_sections=sections) \
                if width else []
            tab_widths_of.append([w for _, w in sections])
            wrap_offsets_of.append(offsets)
            rows = []
            for section in range(len(offsets) + 1):
                line_info.append((index, section))
                rows.append(row)
                row += 1
            offsets_of.append(rows)
        self._wrap_offsets = wrap_offsets_of
        self._offset_to_line_info = line_info
        self._line_index_to_offsets = offsets_of
        self._tab_width_cache = tab_widths_of

    @property
    def height(self) -> int:
        return len(self._offset_to_line_info)   # one entry per row (Textual sums every line's offsets)


class QuickTextArea(TextArea):
    """A plain-text TextArea (no language) whose cost per key does not grow with the text."""

    _rendering = False

    def _set_document(self, text: str, language: str | None) -> None:
        if language:
            raise ValueError("QuickTextArea edits plain text: no language")
        # what TextArea._set_document does for plain text, with the quick wrapper
        self._highlight_query = None
        document = Document(text)
        self.document = document
        self.wrapped_document = _QuickWrap(document, tab_width=self.indent_width)
        self.navigator = DocumentNavigator(self.wrapped_document)
        self._build_highlight_map()
        self.move_cursor((0, 0))
        self._rewrap_and_refresh_virtual_size()

    def render_line(self, y: int) -> Strip:
        self._rendering = True
        try:
            return super().render_line(y)
        finally:
            self._rendering = False

    @property
    def text(self) -> str:
        if self._rendering:   # TextArea.render_line asks `not self.text` only to draw its placeholder
            document = self.document
            return "" if document.line_count == 1 and not document[0] else "\n"
        return self.document.text

    @text.setter
    def text(self, value: str) -> None:
        self.load_text(value)
