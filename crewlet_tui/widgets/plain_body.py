"""A large page's body as plain text, laid out only where it is seen.

Textual's Markdown widget builds a widget per block and lays every one out: a 5.5 MB page of 100,000 short
lines took seconds to open and 3.4 s a PageDown (bench/large_pages.py). This widget keeps the lines as they
are, wraps them to the width once (a list of row starts, a few milliseconds per 100,000 lines), and draws a
row only when the screen asks for it (Textual's line API): its cost per key does not grow with the page.
"""
from __future__ import annotations

from array import array

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget


class PlainBody(Widget):
    DEFAULT_CSS = """
    PlainBody {
        height: auto;
    }
    """

    def __init__(self, text: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[str] = text.split("\n") if text else []
        self._width = 0
        # row r shows line _line_of[r] from character _start_of[r] (a long line takes several rows)
        self._line_of = array("l")
        self._start_of = array("l")
        self._ends: dict[int, list[int]] = {}    # a wide-character line's row starts (cells are not characters)

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def show(self, text: str) -> None:
        self._lines = text.split("\n") if text else []
        self._width = 0
        self.refresh(layout=True)

    def _wrap(self, width: int) -> None:
        if width == self._width and (self._line_of or not self._lines):
            return
        width = max(1, width)
        line_of, start_of, ends = array("l"), array("l"), {}
        for n, line in enumerate(self._lines):
            if len(line) <= width and (line.isascii() or cell_len(line) <= width):
                line_of.append(n)
                start_of.append(0)
            elif line.isascii():
                for start in range(0, len(line), width):
                    line_of.append(n)
                    start_of.append(start)
            else:
                starts, at = [], 0
                for piece in chop_cells(line, width):
                    line_of.append(n)
                    start_of.append(at)
                    starts.append(at)
                    at += len(piece)
                ends[n] = starts
        self._line_of, self._start_of, self._ends, self._width = line_of, start_of, ends, width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._wrap(width)
        return len(self._line_of)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        self._wrap(width)
        if y >= len(self._line_of):
            return Strip.blank(width, self.rich_style)
        n, start = self._line_of[y], self._start_of[y]
        line = self._lines[n]
        if n in self._ends:
            starts = self._ends[n]
            i = starts.index(start)
            end = starts[i + 1] if i + 1 < len(starts) else len(line)
        else:
            end = start + width
        return Strip([Segment(line[start:end], self.rich_style)]).adjust_cell_length(width, self.rich_style)
