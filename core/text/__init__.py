"""Text derived from what people write: Markdown reduced to plain text (`core.text.markdown`)."""
