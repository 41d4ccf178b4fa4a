"""Answers from what the company wrote down: a question in words, a short Markdown answer written by a
chat model from the knowledge base's own pages and nothing else, every claim cited as [n].

The package is light to import (company.toml's `[providers.llm]` is validated through `settings` by
every command); the answering itself is `core.ask.answer` (`Asker`, `answer`), which imports the search
engine and httpx when it runs.
"""
