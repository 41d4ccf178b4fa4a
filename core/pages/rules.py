"""Who may write where: the rules that depend on the configuration and the actor, asked by the
writer before a record is appended. (Rules that depend on order are the applier's.)"""
from __future__ import annotations

from typing import Any

from ..config import Actor, Company
from ..errors import Refused


def acting(company: Company, handle: str | None, *, knowledge: bool = False) -> Actor:
    """Who acts: `handle`, else the company's operator — the one check of an actor every surface makes
    (a command's --as, the app's session, a search, a write). Refused: nobody to act as (no handle and no
    operator), a handle the company does not configure (ConfigError, naming the actors it has), and with
    `knowledge`, an actor who does not hold the knowledge app."""
    handle = handle or company.operator
    if not handle:
        raise Refused(f"no actor to act as: set `operator = \"…\"` in {company.file}, or pass --as HANDLE",
                      code="no_actor")
    who = company.actor(handle)
    if knowledge:
        require_knowledge(company, who)
    return who


def require_knowledge(company: Company, actor: Actor) -> None:
    """Reading and authoring pages is the knowledge app: every agent holds it, a person unless an
    admin unticked it (`knowledge = false`), and admin includes it."""
    if not actor.holds_knowledge:
        raise Refused(f"{actor.handle} does not hold the knowledge app",
                      fix=f"an admin sets `knowledge = true` under [actors.{actor.handle}] in {company.file}",
                      code="forbidden")


def _not_declared(company: Company, key: str) -> Refused:
    declared = sorted(company.declared_containers())
    return Refused(f"container '{key}' is not a declared space", code="not_declared", declared=declared,
                   fix=f"declare it in {company.file} as [spaces.{key}] (name = \"…\"), or pick one of: {', '.join(declared)}")


def may_create(company: Company, actor: Actor, container: str) -> None:
    require_knowledge(company, actor)
    if not company.is_declared(container):
        raise _not_declared(company, container)
    kn = company.knowledge
    if actor.is_agent and container == kn.skills_container:
        raise Refused(f"an agent may not write in the skills container {container}: a page there is an instruction "
                      "to every seat — ask a person with admin", code="reserved")
    if actor.is_agent and container == kn.root_space:
        raise Refused(f"an agent may not add a page to the root space {container}: a new company-wide page is a "
                      "person's decision — publish in your team's space", code="reserved")
    _skills_admin(company, actor, container, "create a page")


def _skills_admin(company: Company, actor: Actor, container: str, verb: str) -> None:
    if container == company.knowledge.skills_container and not actor.is_agent and not actor.admin:
        raise Refused(f"{actor.handle} may not {verb} in the skills container {container}: a tool skill is "
                      "configuration and needs admin", code="forbidden")


def _no_agent_in_skills(company: Company, actor: Actor, container: str, verb: str) -> None:
    if actor.is_agent and container == company.knowledge.skills_container:
        raise Refused(f"an agent may not {verb} in the skills container {container}", code="reserved")


def may_save(company: Company, actor: Actor, page: Any) -> None:
    require_knowledge(company, actor)
    _no_agent_in_skills(company, actor, page["container"], "save a page")
    _skills_admin(company, actor, page["container"], "save a page")


def may_move(company: Company, actor: Actor, page: Any) -> None:
    require_knowledge(company, actor)
    _no_agent_in_skills(company, actor, page["container"], "move a page")
    _skills_admin(company, actor, page["container"], "move a page")


def _tidier(company: Company, actor: Actor, page: Any, verb: str) -> None:
    """Rename, trash and restore: the page's creator, its container's lead, or an admin."""
    if actor.admin or actor.handle == page["created_by"] or actor.handle == company.lead_of(page["container"]):
        return
    lead = company.lead_of(page["container"])
    raise Refused(f"{actor.handle} may not {verb} {page['container']}/{page['title']}: that is for its creator "
                  f"({page['created_by']}), the lead of {page['container']} ({lead or 'none declared'}) or an admin",
                  code="forbidden")


def may_rename(company: Company, actor: Actor, page: Any) -> None:
    require_knowledge(company, actor)
    _no_agent_in_skills(company, actor, page["container"], "rename a page")
    _skills_admin(company, actor, page["container"], "rename a page")
    _tidier(company, actor, page, "rename")


def may_trash(company: Company, actor: Actor, page: Any, verb: str = "trash") -> None:
    require_knowledge(company, actor)
    _no_agent_in_skills(company, actor, page["container"], f"{verb} a page")
    _skills_admin(company, actor, page["container"], f"{verb} a page")
    _tidier(company, actor, page, verb)


def may_purge(company: Company, actor: Actor, page: Any) -> None:
    require_knowledge(company, actor)
    if actor.is_agent:
        raise Refused("an agent may never purge: a purge cannot be undone", code="forbidden")
    if not actor.admin:
        raise Refused(f"{actor.handle} may not purge: a purge cannot be undone and is an admin's alone — "
                      "trash the page instead (it can be restored for 30 days)", code="forbidden")


def may_comment(company: Company, actor: Actor, page: Any) -> None:
    require_knowledge(company, actor)
    _no_agent_in_skills(company, actor, page["container"], "comment")


def may_edit_comment(company: Company, actor: Actor, comment: Any, page: Any) -> None:
    require_knowledge(company, actor)
    _no_agent_in_skills(company, actor, page["container"], "edit a comment")
    if comment["author"] != actor.handle:
        raise Refused(f"comment {comment['id']} is {comment['author']}'s: only its author edits it", code="forbidden")


def may_remove_comment(company: Company, actor: Actor, comment: Any, page: Any) -> None:
    require_knowledge(company, actor)
    _no_agent_in_skills(company, actor, page["container"], "remove a comment")
    if comment["author"] != actor.handle and not actor.admin:
        raise Refused(f"comment {comment['id']} is {comment['author']}'s: only its author or an admin removes it",
                      code="forbidden")
