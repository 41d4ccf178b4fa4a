"""The knowledge bank (spec 003; docs/entries.md): entries — one fact each, under a page, checked against the
code they cite — with their triage, decay and generated pages.

Its settings are here so far (`settings.py`: the bank's part of [knowledge], each value with the layer it
came from); the entries' records, duties and tools join this package.
"""
