"""crewlet's faces: the Textual app and the typer CLI, both thin over `core`."""
