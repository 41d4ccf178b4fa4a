"""Search: the lexical index (Whoosh BM25), the Searcher seam, and later the semantic half."""
