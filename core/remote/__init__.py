"""The remote knowledge backends: Confluence and Plane, searched live behind the Searcher seam.

There is no local copy of a remote backend's pages: a search is one request to the backend's own search
API (Plane: at most three, relaxing the query), made as the searching actor's own user where the actor
has a credential, so the backend's own permissions are the boundary. Page bodies open through the
backend's page API and are read as Markdown; `crewlet confluence import` / `crewlet plane import`
publish a directory of Markdown there, planned by the same code as the native import.

Modules: `http` (one connection pool per searcher, bounded requests, every failure in words),
`credentials` (whose credential a request carries), `access` (scope, the empty-scope rule, exclusions),
`searcher` (what both searchers share: the seam's contract), `confluence`, `plane`, `convert` (HTML ↔
Markdown), `publish` (the importers). Importing this package imports none of them (httpx loads with
the first searcher).
"""
