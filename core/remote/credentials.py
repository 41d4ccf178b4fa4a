"""Whose credential a request to a remote backend carries.

The actor's own, when its `[actors.HANDLE.credentials]` names one and the variable is set: the backend
then enforces that user's permissions natively (a restricted page it cannot see never comes back). Else
the company's (`[integrations.*].token_env`), and the answer says so — with the empty-scope rule on top
(core/remote/access.py): the company's credential searches only a declared read floor.

Confluence: a username beside the token is Cloud (HTTP basic, username:API token); a token alone is
Data Center (a bearer personal access token). Plane: the key in `X-API-Key`. Secrets are read from the
environment at each request (so a rotated key is used at once) and never leave this module but in a
request's headers.
"""
from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import Actor, Company
from .http import Auth


@dataclass(frozen=True)
class Credential:
    owner: str                    # "own" (the actor's) | "company"
    handle: str | None            # the actor, for "own"
    env: str                      # the variable holding the token or key
    username_env: str = ""
    auth: Auth = field(default_factory=Auth, repr=False)

    @property
    def own(self) -> bool:
        return self.owner == "own"

    def describe(self) -> str:
        who = f"{self.handle}'s own credential" if self.own else "the company's credential"
        return f"{who} (${self.env})"

    def to_json(self) -> dict[str, Any]:
        return {"credential": self.owner, "actor": self.handle, "env": self.env,
                "username_env": self.username_env or None}


@dataclass
class Choice:
    """The credential a request will carry, or None and why; notes say what was passed over."""

    credential: Credential | None
    notes: list[str] = field(default_factory=list)
    missing: str = ""


def _get(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip() if name else ""


def _confluence_auth(token: str, username: str) -> Auth:
    if username:
        pair = base64.b64encode(f"{username}:{token}".encode()).decode("ascii")
        return Auth({"Authorization": f"Basic {pair}"}, (token, pair))
    return Auth({"Authorization": f"Bearer {token}"}, (token,))


def confluence_credential(company: Company, actor: Actor | None,
                          env: Mapping[str, str] | None = None) -> Choice:
    env = os.environ if env is None else env
    settings = company.integrations.confluence
    notes: list[str] = []
    if actor is not None and actor.credentials.confluence_token_env:
        c = actor.credentials
        token = _get(env, c.confluence_token_env)
        username = _get(env, c.confluence_username_env)
        if token and (username or not c.confluence_username_env):
            return Choice(Credential("own", actor.handle, c.confluence_token_env, c.confluence_username_env,
                                     _confluence_auth(token, username)))
        unset = c.confluence_token_env if not token else c.confluence_username_env
        notes.append(f"{actor.handle}'s own credential was not used: ${unset} is not set")
    if settings is None:
        return Choice(None, notes, f"there is no [integrations.confluence] in {company.file}")
    token = _get(env, settings.token_env)
    username = _get(env, settings.username_env)
    if not token or (settings.username_env and not username):
        unset = settings.token_env if not token else settings.username_env
        return Choice(None, notes, f"${unset} is not set (integrations.confluence names it) — export it, or give "
                                   "the actor its own credential under [actors.HANDLE.credentials]")
    return Choice(Credential("company", None, settings.token_env, settings.username_env,
                             _confluence_auth(token, username)), notes)


def plane_credential(company: Company, actor: Actor | None, env: Mapping[str, str] | None = None) -> Choice:
    env = os.environ if env is None else env
    settings = company.integrations.plane
    notes: list[str] = []
    if actor is not None and actor.credentials.plane_token_env:
        name = actor.credentials.plane_token_env
        key = _get(env, name)
        if key:
            return Choice(Credential("own", actor.handle, name, auth=Auth({"X-API-Key": key}, (key,))))
        notes.append(f"{actor.handle}'s own credential was not used: ${name} is not set")
    if settings is None:
        return Choice(None, notes, f"there is no [integrations.plane] in {company.file}")
    key = _get(env, settings.token_env)
    if not key:
        return Choice(None, notes, f"${settings.token_env} is not set (integrations.plane names it) — export it, "
                                   "or give the actor its own credential under [actors.HANDLE.credentials]")
    return Choice(Credential("company", None, settings.token_env, auth=Auth({"X-API-Key": key}, (key,))), notes)


def credential_for(backend: str, company: Company, actor: Actor | None,
                   env: Mapping[str, str] | None = None) -> Choice:
    return (confluence_credential if backend == "confluence" else plane_credential)(company, actor, env)
