"""Page bodies across the boundary: a remote backend's HTML read as Markdown, Markdown written as its HTML.

Reading: markdownify (over BeautifulSoup's tree), with converters for what Confluence's storage format
adds to HTML — the code macro (its CDATA body and language), the info/note/warning/tip panels, the
expand macro, links to pages and attachments, images, task lists, emoticons — and for Plane's editor
(task items carrying data-checked). A code block holding a run of backticks is fenced with a longer
run. bench/html_markdown.py measured markdownify against html-to-markdown on a round trip over real
documentation: html-to-markdown was faster per page and kept a few more plain-HTML pages, but it drops
CDATA outright — every Confluence code macro's body — and its hooks see serialised HTML rather than a
tree, so storage would need a second parser in front of it. A page opens once per request; the few
milliseconds markdownify costs are nothing beside the request.

Writing: markdown-it-py (already the project's Markdown parser) renders with raw HTML off (a doc's
HTML is shown as the text it is, as the app does) and XHTML output; for Confluence storage a fenced
block becomes the code macro (CDATA split around any "]]>") and an image the `ac:image` element.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdownify import MarkdownConverter

_PANELS = {"info": "Info", "note": "Note", "warning": "Warning", "tip": "Tip", "panel": "", "success": "Success",
           "error": "Error"}
_SILENT_MACROS = {"toc", "children", "anchor", "pagetree", "recently-updated", "contentbylabel", "livesearch"}
_BACKTICKS = re.compile(r"`+")


def _fence(code: str, language: str = "") -> str:
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(code)), default=0)
    fence = "`" * max(3, longest + 1)
    body = code if code.endswith("\n") or not code else code + "\n"
    return f"\n\n{fence}{language}\n{body}{fence}\n\n"


def _param(el: Any, name: str) -> str:
    for p in el.find_all("ac:parameter", recursive=False):
        if p.get("ac:name") == name:
            return p.get_text().strip()
    return ""


class _Reader(MarkdownConverter):
    """markdownify, taught Confluence storage and Plane's editor HTML."""

    class Options(MarkdownConverter.DefaultOptions):
        heading_style = "ATX"
        bullets = "-"
        bs4_options = "html.parser"

    # -- plain HTML -------------------------------------------------------------------------------
    def convert_pre(self, el: Any, text: str, parent_tags: set[str]) -> str:
        code = el.find("code")
        language = ""
        for cls in (code.get("class") or []) if code is not None else []:
            if cls.startswith("language-"):
                language = cls[len("language-"):]
        return _fence(el.get_text(), language)

    def convert_li(self, el: Any, text: str, parent_tags: set[str]) -> str:
        checked = el.get("data-checked")
        if checked is not None and text.strip():      # Plane's task item
            text = ("[x] " if checked == "true" else "[ ] ") + text.strip()
        return super().convert_li(el, text, parent_tags)

    def convert_input(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return ""

    # -- Confluence storage ---------------------------------------------------------------------------
    def convert_ac_structured_macro(self, el: Any, text: str, parent_tags: set[str]) -> str:
        name = (el.get("ac:name") or "").lower()
        if name in ("code", "noformat"):
            body = el.find("ac:plain-text-body")
            return _fence(body.get_text() if body is not None else "", _param(el, "language"))
        if name in _SILENT_MACROS:
            return ""
        if name in _PANELS:
            label = _param(el, "title") or _PANELS[name]
            inner = text.strip()
            if label:
                inner = f"**{label}:** {inner}" if inner else f"**{label}**"
            return "\n\n" + "\n".join(f"> {line}" if line else ">" for line in inner.split("\n")) + "\n\n"
        if name == "expand":
            title = _param(el, "title")
            return (f"\n\n**{title}**\n\n" if title else "\n\n") + text.strip() + "\n\n"
        return text

    convert_ac_macro = convert_ac_structured_macro

    def convert_ac_parameter(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return ""

    def convert_ac_link(self, el: Any, text: str, parent_tags: set[str]) -> str:
        label = text.strip()
        if label:
            return label
        for tag, attr in (("ri:page", "ri:content-title"), ("ri:attachment", "ri:filename"), ("ri:space", "ri:space-key"),
                          ("ri:user", "ri:username")):
            target = el.find(tag)
            if target is not None and target.get(attr):
                return target.get(attr)
        return ""

    def convert_ac_image(self, el: Any, text: str, parent_tags: set[str]) -> str:
        alt = el.get("ac:alt") or el.get("ac:title") or ""
        url = el.find("ri:url")
        if url is not None and url.get("ri:value"):
            return f"![{alt}]({url.get('ri:value')})"
        attachment = el.find("ri:attachment")
        name = attachment.get("ri:filename") if attachment is not None else ""
        return f"[image: {alt or name}]" if (alt or name) else ""

    def convert_ac_task(self, el: Any, text: str, parent_tags: set[str]) -> str:
        status = el.find("ac:task-status")
        done = status is not None and status.get_text().strip() == "complete"
        body = el.find("ac:task-body")
        words = " ".join(self.process_tag(body, parent_tags).split()) if body is not None else ""
        return f"- [{'x' if done else ' '}] {words}\n"

    def convert_ac_task_list(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return "\n\n" + text.strip("\n") + "\n\n"

    def _nothing(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return ""

    convert_ac_task_status = convert_ac_task_id = convert_ac_placeholder = _nothing

    def convert_ac_emoticon(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return el.get("ac:emoji-fallback") or ""

    def convert_time(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return text or el.get("datetime") or ""


_READER = _Reader()


def html_to_markdown(html: str) -> str:
    """A backend's page HTML (Confluence storage XHTML, Plane description_html) as Markdown."""
    if not html or not html.strip():
        return ""
    out = _READER.convert(html)
    return re.sub(r"\n{3,}", "\n\n", out).strip() + "\n"


storage_to_markdown = html_to_markdown


# -- writing -----------------------------------------------------------------------------------------

def _cdata(text: str) -> str:
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


@lru_cache(maxsize=2)
def _writer(storage: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "xhtmlOut": True}).enable(["table", "strikethrough"])
    if storage:
        def fence(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
            token = tokens[idx]
            language = (token.info or "").strip().split(" ")[0] if token.type == "fence" else ""
            param = (f'<ac:parameter ac:name="language">{escapeHtml(language)}</ac:parameter>' if language else "")
            return (f'<ac:structured-macro ac:name="code">{param}'
                    f"<ac:plain-text-body>{_cdata(token.content)}</ac:plain-text-body></ac:structured-macro>\n")

        def image(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
            token = tokens[idx]
            alt = escapeHtml("".join(c.content for c in (token.children or [])))
            return f'<ac:image ac:alt="{alt}"><ri:url ri:value="{escapeHtml(token.attrGet("src") or "")}" /></ac:image>'

        md.add_render_rule("fence", fence)
        md.add_render_rule("code_block", fence)
        md.add_render_rule("image", image)
    return md


def markdown_to_storage(markdown: str) -> str:
    """Markdown as Confluence storage XHTML (a page's body.storage value)."""
    return _writer(True).render(markdown or "")


def markdown_to_html(markdown: str) -> str:
    """Markdown as HTML (a Plane page's description_html)."""
    return _writer(False).render(markdown or "")
