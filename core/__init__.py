"""crewlet's engine: pages on an ordered log, applied into SQLite, searched. No UI imports."""
