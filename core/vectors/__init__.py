"""The vector store: every node's replicated vectors and the semantic index's state, as the vector log
leaves them in SQLite — the records and how they are applied, the one reader of stored vectors, and the
one Hamming kernel over their sign codes. Search (core/search) ranks over it; the embedding duty and the
index training (core/duties) write to it through its records."""
