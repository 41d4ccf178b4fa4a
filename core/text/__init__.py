"""Text derived from what people write: Markdown reduced to plain text (`core.text.markdown`), what a
title is (`core.text.titles`), whether a text holds a credential (`core.text.credentials`) and whether it
makes one claim (`core.text.claims`)."""
