"""The sections of company.toml (and node.toml's), one module each: `embed` ([providers.embeddings]), `chat`
([providers.llm]), `log` ([log]), `remote` ([integrations.*], an actor's credentials), `pages` ([limits]),
`repos` ([repositories.NAME]) and `bank` (the knowledge bank's keys of [knowledge]). Each is a dataclass whose
defaults are what an absent table means and a `parse(file, raw)` built on the kit (core/settings.py).

They stand below core/config.py, which composes them, and below the features that read them: a feature imports
its section downwards, and config never imports a feature's package (no circle between packages).
"""
