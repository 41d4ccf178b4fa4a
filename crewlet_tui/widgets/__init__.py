"""Widgets the screens share: the lazy page tree, the safe Markdown body, the title and status lines."""
