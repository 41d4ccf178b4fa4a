"""Who may search a remote backend, as whom, and over which containers: decided once per search.

The read scope is the active backend's list (knowledge.confluence_spaces / knowledge.plane_projects),
role- and unit-independent, read off the configuration current at each call. An empty list is the
useful default, and what it means depends on the credential (the spec's empty-scope rule):

- an actor searching with its OWN credential searches unscoped: the container clause is dropped and
  the backend's own permissions bound the hits;
- a search on the COMPANY's credential (an actor with none of its own) searches nothing: unscoped, it
  would read the shared account's entire view.

A caller's own narrowing (`Query.containers`, the CLI's --container) works inside the scope, as on the
native backend. The tool-skills container never comes back, and hits under an excluded ancestor title
(default "Auto-Drafted Skills", with the "[Auto-draft]" title prefix as a fail-closed backstop) are
dropped by the backend's searcher.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..config import AUTO_DRAFT_TITLE_PREFIX, AUTO_DRAFTED_PARENT, SCOPE_KEYS, Actor, Company
from ..pages.model import normalise_title
from ..search.access import Denial, who_searches
from ..search.seam import OUT_OF_SCOPE, UNAVAILABLE, Query, canonical_mode, modes_in_words
from .credentials import Credential, credential_for

NO_CREDENTIAL = "no_credential"        # neither the actor nor the company has a credential that is set


@dataclass
class RemoteAccess:
    actor: Actor | None
    mode: str
    credential: Credential
    containers: list[str] | None           # the containers a search is narrowed to (None: unscoped)
    skills: str                            # never returned
    exclusions: frozenset[str]             # excluded ancestor titles, normalised
    draft_backstop: bool                   # also drop "[Auto-draft]" titles
    notes: list[str] = field(default_factory=list)

    def excluded_title(self, title: str) -> bool:
        return self.draft_backstop and title.strip().lower().startswith(AUTO_DRAFT_TITLE_PREFIX.lower())

    def excluded_ancestors(self, titles: list[str]) -> bool:
        return bool(self.exclusions) and any(normalise_title(t) in self.exclusions for t in titles if t)

    def admits_container(self, container: str) -> bool:
        return container != self.skills and (self.containers is None or container in self.containers)


def skills_container(company: Company, backend: str) -> str:
    plane = company.integrations.plane
    return plane.skills_project if backend == "plane" and plane is not None else company.knowledge.skills_container


def decide(company: Company, query: Query, backend: str, label: str,
           env: Mapping[str, str] | None = None, *, reading: bool = False) -> RemoteAccess | Denial:
    """The access of one search, or why it does not run. `reading`: the same rules for one page read
    (get_page), the denial worded for a read."""
    done, does = ("read", "reads") if reading else ("searched", "searches")
    mode = canonical_mode(query.mode)        # the seam's own names and aliases, as the native policy reads them
    if mode is None:
        return Denial(UNAVAILABLE, f"mode '{query.mode}' is not one of: {modes_in_words()}")
    who = who_searches(company, query)
    if isinstance(who, Denial):
        return who
    handle = query.actor or company.operator
    if company.knowledge.backend != backend:
        return Denial(UNAVAILABLE, f"this company does not search {label}: knowledge.backend is "
                                   f"'{company.knowledge.backend}' in {company.file}", modes_known=False)
    choice = credential_for(backend, company, who, env)
    if choice.credential is None:
        return Denial(NO_CREDENTIAL, f"{label} could not be {done}: no credential — {choice.missing}")
    credential = choice.credential
    notes = list(choice.notes)
    scope_key = f"knowledge.{SCOPE_KEYS[backend]}"
    scope = set(company.scope())
    skills = skills_container(company, backend)
    wanted = {c.strip() for c in (query.containers or []) if c and c.strip()}
    if not scope and not credential.own:
        who_words = f"{handle} has no credential of its own" if handle else "no actor is searching"
        cred_key = "confluence_token_env" if backend == "confluence" else "plane_token_env"
        return Denial(OUT_OF_SCOPE, f"nothing {done}: {who_words}, and the company's credential {does} only "
                                    f"{scope_key}, which is empty — list the containers it may read there, or give "
                                    f"{handle or 'the actor'} its own credential ({cred_key} under "
                                    f"[actors.{handle or 'HANDLE'}.credentials])")
    if skills in wanted:
        notes.append(f"{skills} holds tool skills, which search never returns")
    outside = sorted(wanted - scope) if scope else []
    if outside:
        notes.append(f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} outside {scope_key} "
                     f"({', '.join(sorted(scope))})")
    if wanted:
        containers: list[str] | None = sorted((wanted & scope if scope else wanted) - {skills})
        if not containers:
            return Denial(OUT_OF_SCOPE, "nothing searched: " + "; ".join(notes or ["no container asked for can be searched"]))
    else:
        containers = sorted(scope - {skills}) if scope else None
        if scope and not containers:
            return Denial(OUT_OF_SCOPE, f"nothing searched: {scope_key} lists only {skills}, which holds tool skills")
    exclusions = frozenset(normalise_title(t) for t in query.effective_exclusions() if t and t.strip())
    return RemoteAccess(actor=who, mode=mode, credential=credential, containers=containers, skills=skills,
                        exclusions=exclusions, draft_backstop=normalise_title(AUTO_DRAFTED_PARENT) in exclusions,
                        notes=notes)
