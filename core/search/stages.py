"""The two stages' sizes, apart from the semantic engine (semantic.py, which loads numpy): a keyword
search reads how deep a half is read without loading it."""

STAGE_ONE = 1200      # candidates kept by Hamming distance
STAGE_TWO = 150       # returned by exact cosine
