"""Text derived from what people write: Markdown reduced to plain text (`core.text.markdown`), and what a
title is (`core.text.titles`)."""
