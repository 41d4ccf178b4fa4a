"""The node's background duties and the one runner that runs them."""
