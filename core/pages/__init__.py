"""The knowledge base: commands become records, the applier writes rows, queries read them."""
