"""Answers from what the company wrote down: a question in words, a short Markdown answer written by a
chat model from the knowledge base's own pages and nothing else, every claim cited as [n].

`core.ask.answer` (`Asker`, `answer`) is the entry point; the model is core.chat's (`[providers.llm]`).
"""
