"""Schema migrations as named functions, each recorded in `_migrations` once it has run.

A new migration is a new function appended to MIGRATIONS; never edit one that has shipped.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..clock import now_ms

Migration = Callable[[Any], None]


def _run_script(conn: Any, script: str) -> None:
    """executescript() would COMMIT the migration's open transaction, so run statement by statement."""
    for statement in script.split(";\n"):
        if statement.strip():
            conn.execute(statement)


def m001_pages(conn: Any) -> None:
    _run_script(conn, 
        """
        -- where the applier is on the log; advanced in the same transaction as the rows it applied
        CREATE TABLE log_position (
            name TEXT PRIMARY KEY,
            seq INTEGER NOT NULL,
            byte_offset INTEGER NOT NULL
        );
        -- every applied op_id and the outcome the applier decided (idempotency + the writer's answer)
        CREATE TABLE applied_ops (
            op_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            status TEXT NOT NULL,          -- applied | refused | noop
            code TEXT,                     -- machine-readable reason when refused / warned
            reason TEXT,                   -- one line for a person
            result TEXT                    -- JSON: ids the op produced, warnings
        );
        CREATE INDEX applied_ops_seq ON applied_ops(seq);
        -- a container document per declared space
        CREATE TABLE containers (
            key TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            purpose TEXT NOT NULL DEFAULT '',
            lead TEXT,
            chart_epoch INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE pages (
            id TEXT PRIMARY KEY,
            container TEXT NOT NULL,
            address TEXT NOT NULL,         -- the title normalised: what a link resolves
            title TEXT NOT NULL,           -- the title as its author capitalised it
            body TEXT NOT NULL,
            revision INTEGER NOT NULL,
            parent_id TEXT,
            created_by TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            saved_by TEXT NOT NULL,
            saved_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            trashed_at INTEGER,
            trashed_by TEXT,
            labels TEXT NOT NULL DEFAULT '[]', -- JSON list, lower-cased and de-duplicated
            version INTEGER NOT NULL       -- log seq of the last record that touched the row
        );
        -- a trashed page keeps its address: restoring it can never collide
        CREATE UNIQUE INDEX pages_address ON pages(container, address);
        CREATE INDEX pages_level ON pages(container, parent_id, address);
        CREATE INDEX pages_parent ON pages(parent_id);
        CREATE INDEX pages_trashed ON pages(trashed_at) WHERE trashed_at IS NOT NULL;
        CREATE INDEX pages_version ON pages(version);
        CREATE TABLE revisions (
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            revision INTEGER NOT NULL,
            title TEXT NOT NULL,
            body TEXT,                     -- NULL for the page's current revision: its body is pages.body
            author TEXT NOT NULL,
            at INTEGER NOT NULL,
            kind TEXT NOT NULL,            -- create | save | rename
            message TEXT,                  -- only ever the writer's own words
            PRIMARY KEY (page_id, revision)
        );
        CREATE TABLE comments (
            id TEXT PRIMARY KEY,
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            author TEXT NOT NULL,
            body TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            edited_at INTEGER
        );
        CREATE INDEX comments_page ON comments(page_id, created_at);
        -- a purged page's marker: a replayed or redelivered record can never resurrect it
        CREATE TABLE deleted_pages (
            page_id TEXT PRIMARY KEY,
            container TEXT NOT NULL,
            title TEXT NOT NULL,
            purged_by TEXT NOT NULL,
            purged_at INTEGER NOT NULL,
            reason TEXT NOT NULL DEFAULT ''
        );
        -- one event per act by an agent, listing the pages it reached
        CREATE TABLE knowledge_reads (
            op_id TEXT PRIMARY KEY,
            actor TEXT NOT NULL,
            at INTEGER NOT NULL,
            via TEXT NOT NULL,
            query TEXT,
            pages TEXT NOT NULL            -- JSON [{id, container, title, rank}]
        );
        CREATE INDEX knowledge_reads_at ON knowledge_reads(at);
        CREATE TABLE agent_onboarding_markers (
            agent_id TEXT PRIMARY KEY,
            chain_hash TEXT NOT NULL,
            marked_at INTEGER NOT NULL,
            lease_owner TEXT,
            lease_until INTEGER
        );
        -- derived by the indexer, never by the applier: backlinks by page id
        CREATE TABLE page_links (
            src TEXT NOT NULL,
            dst TEXT NOT NULL,
            PRIMARY KEY (src, dst)
        );
        CREATE INDEX page_links_dst ON page_links(dst);
        """
    )


def m002_read_context(conn: Any) -> None:
    """A read names the backend its page ids are addresses in, and the turn and phase it happened in."""
    conn.execute("ALTER TABLE knowledge_reads ADD COLUMN backend TEXT NOT NULL DEFAULT 'native'")
    conn.execute("ALTER TABLE knowledge_reads ADD COLUMN turn TEXT")
    conn.execute("ALTER TABLE knowledge_reads ADD COLUMN phase TEXT")


def m003_duties(conn: Any) -> None:
    """Each background duty's cursor and last pass, readable by every process on the home."""
    _run_script(conn, """
        CREATE TABLE duties (
            name TEXT PRIMARY KEY,
            cursor TEXT,                   -- where the duty is (its own format)
            last_run_at INTEGER,
            last_summary TEXT,
            last_error TEXT,
            holder TEXT,                   -- who ran the last pass
            status TEXT                    -- JSON: the duty's state after its last pass
        )
        """)


def m004_vectors(conn: Any) -> None:
    """Each source's vector (the wide table) and its 1-bit sign code (the narrow sibling), applied from
    the vector log; and the embedding duty's memory of the sources a provider refused."""
    _run_script(conn, """
        CREATE TABLE vectors (
            id INTEGER PRIMARY KEY,        -- also the code's key in vector_codes
            source_id TEXT NOT NULL,       -- the page id
            kind TEXT NOT NULL,            -- 'page'
            space TEXT NOT NULL,           -- the embedding space (provider, model, width, tokenizer)
            container TEXT NOT NULL,       -- where the source lives: scoped searches filter on it
            revision INTEGER NOT NULL,     -- the page revision whose title and body were embedded
            digest TEXT NOT NULL,          -- sha256 of exactly the bytes the provider received
            bytes INTEGER NOT NULL,
            bucket INTEGER NOT NULL,       -- a stable hash of source_id into 64 buckets
            dims INTEGER NOT NULL,
            seq INTEGER NOT NULL,          -- the vector-log record that filed it
            vector BLOB NOT NULL           -- float32 little-endian; the last column, so reading the
                                           -- columns before it never walks its overflow pages
        );
        CREATE UNIQUE INDEX vectors_source ON vectors(source_id, space);
        CREATE INDEX vectors_space ON vectors(space, container);
        -- the narrow sibling: only the sign codes (sqlite-vec bit vectors), a contiguous narrow read
        CREATE TABLE vector_codes (
            id INTEGER PRIMARY KEY,        -- vectors.id
            code BLOB NOT NULL             -- vec_quantize_binary(vector): one bit a dimension
        );
        -- sources a provider refused: held back an hour, this node's own memory (a duty that moves to
        -- another node isolates each once again)
        CREATE TABLE embed_holds (
            source_id TEXT PRIMARY KEY,
            revision INTEGER NOT NULL,     -- a rewritten source is a new text, offered at once
            fingerprint TEXT NOT NULL,     -- the provider configuration that refused it
            refused_at INTEGER NOT NULL,
            held_until INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            reason TEXT NOT NULL
        )
        """)


def m005_log_position_digest(conn: Any) -> None:
    """A position names the frame it ends: where that frame starts and a digest of its body, so an
    open can tell the log still holds, at that place, the very record the database applied."""
    conn.execute("ALTER TABLE log_position ADD COLUMN frame_offset INTEGER")
    conn.execute("ALTER TABLE log_position ADD COLUMN digest TEXT")



def m006_vector_reads(conn: Any) -> None:
    """What lets a node read its codes without walking the wide rows: a covering index of the columns a
    search filters on (a full load of 40,000 × 3,072 read 250 ms of wide leaf pages, 55 ms of this), and
    the vector log position each row was filed at (a search reloads only the rows the log moved)."""
    _run_script(conn, """
        CREATE INDEX vectors_narrow ON vectors(space, id, source_id, container);
        CREATE INDEX vectors_seq ON vectors(seq)
        """)


def m007_semantic_index(conn: Any) -> None:
    """The semantic index (an inverted file over the sign codes), replicated from the vector log: its
    centroids and how many lists a search reads, and each code's list under the index's generation."""
    _run_script(conn, """
        -- a code's list under `generation`, the index that filed it
        ALTER TABLE vector_codes ADD COLUMN list INTEGER;
        ALTER TABLE vector_codes ADD COLUMN generation INTEGER;
        -- the per-list counts a duty tick reads (the skew rule) without touching a code
        CREATE INDEX vector_codes_list ON vector_codes(generation, list);
        CREATE TABLE semantic_index (
            space TEXT PRIMARY KEY,        -- one index per embedding space
            generation INTEGER NOT NULL,   -- the vector-log seq of the record that installed it
            lists INTEGER NOT NULL,
            width INTEGER NOT NULL,        -- bytes a code
            centroids BLOB NOT NULL,       -- lists × width bytes, sign-code layout
            probes INTEGER NOT NULL,       -- lists an unfiltered search reads (measured, never configured)
            ranges TEXT NOT NULL,          -- JSON [[lo, hi], …]: the re-filing batches its training fixed
            refiled INTEGER NOT NULL,      -- batches applied so far
            trained_sources INTEGER NOT NULL,
            fullest INTEGER NOT NULL,      -- codes in the fullest list when the training filed them
            measured TEXT NOT NULL,        -- JSON: the latest measurement (training or daily)
            trained_at INTEGER NOT NULL,
            measured_at INTEGER NOT NULL
        )
        """)


# m008's statements (a trigger's body holds ';', so they are run one by one rather than split)
_COUNTS = [
    """CREATE TABLE page_levels (
        parent TEXT NOT NULL,          -- the level's parent page id, '' for the container's top
        container TEXT NOT NULL,
        live INTEGER NOT NULL,         -- pages there not in the trash
        PRIMARY KEY (parent, container)
    ) WITHOUT ROWID""",
    """CREATE TABLE page_spaces (
        container TEXT PRIMARY KEY,
        live INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE vector_counts (
        space TEXT PRIMARY KEY,
        sources INTEGER NOT NULL,      -- vectors stored in the space
        current INTEGER NOT NULL       -- of those, the ones of a live page's present revision in its container
    ) WITHOUT ROWID""",
    """CREATE TRIGGER pages_count_insert AFTER INSERT ON pages BEGIN
        INSERT INTO page_levels (parent, container, live) SELECT coalesce(NEW.parent_id, ''), NEW.container, 1
            WHERE NEW.trashed_at IS NULL ON CONFLICT (parent, container) DO UPDATE SET live = live + 1;
        INSERT INTO page_spaces (container, live) SELECT NEW.container, 1
            WHERE NEW.trashed_at IS NULL ON CONFLICT (container) DO UPDATE SET live = live + 1;
        UPDATE vector_counts SET current = current + 1 WHERE NEW.trashed_at IS NULL AND space IN (
            SELECT space FROM vectors WHERE source_id = NEW.id AND revision = NEW.revision
            AND container = NEW.container);
    END""",
    """CREATE TRIGGER pages_count_delete AFTER DELETE ON pages WHEN OLD.trashed_at IS NULL BEGIN
        UPDATE page_levels SET live = live - 1 WHERE parent = coalesce(OLD.parent_id, '') AND container = OLD.container;
        UPDATE page_spaces SET live = live - 1 WHERE container = OLD.container;
        UPDATE vector_counts SET current = current - 1 WHERE space IN (
            SELECT space FROM vectors WHERE source_id = OLD.id AND revision = OLD.revision
            AND container = OLD.container);
    END""",
    # a save changes a page's revision and nothing of where it is counted: its level and container counts are
    # touched only when the page moved or went to or from the trash, its vector count only when a vector may
    # stand for it differently
    """CREATE TRIGGER pages_count_move AFTER UPDATE OF container, parent_id, trashed_at ON pages
        WHEN OLD.container IS NOT NEW.container OR OLD.parent_id IS NOT NEW.parent_id
          OR OLD.trashed_at IS NOT NEW.trashed_at BEGIN
        UPDATE page_levels SET live = live - 1 WHERE OLD.trashed_at IS NULL
            AND parent = coalesce(OLD.parent_id, '') AND container = OLD.container;
        UPDATE page_spaces SET live = live - 1 WHERE OLD.trashed_at IS NULL AND container = OLD.container;
        INSERT INTO page_levels (parent, container, live) SELECT coalesce(NEW.parent_id, ''), NEW.container, 1
            WHERE NEW.trashed_at IS NULL ON CONFLICT (parent, container) DO UPDATE SET live = live + 1;
        INSERT INTO page_spaces (container, live) SELECT NEW.container, 1
            WHERE NEW.trashed_at IS NULL ON CONFLICT (container) DO UPDATE SET live = live + 1;
    END""",
    """CREATE TRIGGER pages_count_vectors AFTER UPDATE OF container, trashed_at, revision ON pages
        WHEN OLD.container IS NOT NEW.container OR OLD.trashed_at IS NOT NEW.trashed_at
          OR OLD.revision IS NOT NEW.revision BEGIN
        UPDATE vector_counts SET current = current - 1 WHERE OLD.trashed_at IS NULL AND space IN (
            SELECT space FROM vectors WHERE source_id = OLD.id AND revision = OLD.revision
            AND container = OLD.container);
        UPDATE vector_counts SET current = current + 1 WHERE NEW.trashed_at IS NULL AND space IN (
            SELECT space FROM vectors WHERE source_id = NEW.id AND revision = NEW.revision
            AND container = NEW.container);
    END""",
    """CREATE TRIGGER vectors_count_insert AFTER INSERT ON vectors BEGIN
        INSERT INTO vector_counts (space, sources, current) SELECT NEW.space, 1, EXISTS(
            SELECT 1 FROM pages WHERE id = NEW.source_id AND trashed_at IS NULL AND revision = NEW.revision
            AND container = NEW.container) WHERE true
            ON CONFLICT (space) DO UPDATE SET sources = sources + 1, current = current + excluded.current;
    END""",
    """CREATE TRIGGER vectors_count_delete AFTER DELETE ON vectors BEGIN
        UPDATE vector_counts SET sources = sources - 1, current = current - EXISTS(
            SELECT 1 FROM pages WHERE id = OLD.source_id AND trashed_at IS NULL AND revision = OLD.revision
            AND container = OLD.container) WHERE space = OLD.space;
    END""",
    """CREATE TRIGGER vectors_count_update AFTER UPDATE OF source_id, space, revision, container ON vectors BEGIN
        UPDATE vector_counts SET sources = sources - 1, current = current - EXISTS(
            SELECT 1 FROM pages WHERE id = OLD.source_id AND trashed_at IS NULL AND revision = OLD.revision
            AND container = OLD.container) WHERE space = OLD.space;
        INSERT INTO vector_counts (space, sources, current) SELECT NEW.space, 1, EXISTS(
            SELECT 1 FROM pages WHERE id = NEW.source_id AND trashed_at IS NULL AND revision = NEW.revision
            AND container = NEW.container) WHERE true
            ON CONFLICT (space) DO UPDATE SET sources = sources + 1, current = current + excluded.current;
    END""",
    """INSERT INTO page_levels (parent, container, live)
        SELECT coalesce(parent_id, ''), container, count(*) FROM pages WHERE trashed_at IS NULL GROUP BY 1, 2""",
    """INSERT INTO page_spaces (container, live)
        SELECT container, count(*) FROM pages WHERE trashed_at IS NULL GROUP BY 1""",
    """INSERT INTO vector_counts (space, sources, current)
        SELECT v.space, count(*), count(p.id) FROM vectors v LEFT JOIN pages p ON p.id = v.source_id
        AND p.trashed_at IS NULL AND p.revision = v.revision AND p.container = v.container GROUP BY v.space""",
]


def m008_counts(conn: Any) -> None:
    """Counts kept as the rows change, so a command whose answer is small (`crewlet spaces`, `pages`, `index
    status`, the app's first window of a level) reads a few rows instead of scanning a million: the live
    pages of each level of each container (a page's children are the level whose parent is its id), of each
    container, and each embedding space's vectors and how many of them stand for their page as it is now.

    Kept by triggers, in the transaction that changed the rows — the applier's, a replay's, a repair's — so
    they are right whoever wrote; the backfill below counts a database migrated with pages in it."""
    for statement in _COUNTS:
        conn.execute(statement)


def m009_agent_diary(conn: Any) -> None:
    """Each agent's diary: one row per declarative fact it kept for itself, with its vector under the
    embedding space that computed it. This node's own rows (never on a log: docs/architecture.md, "An
    agent's own memory"), scanned per agent — there is no vector index."""
    _run_script(conn, """
        CREATE TABLE agent_diary (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: an old id can never forget a newer note
            agent TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            space TEXT,                    -- the embedding space of `vector`; NULL: not embedded yet
            held TEXT,                     -- the provider configuration that refused to embed it (skipped
                                           -- by the fill until that configuration changes)
            vector BLOB                    -- float32 little-endian, unit length; the last column
        );
        CREATE INDEX agent_diary_recent ON agent_diary(agent, created_at, id);
        CREATE INDEX agent_diary_space ON agent_diary(agent, space);
        CREATE INDEX agent_diary_fill ON agent_diary(space);
        -- each agent's diary changes, counted by triggers (so every writer counts, in its own transaction):
        -- a reader holding an agent's vectors in memory checks them with one lookup
        CREATE TABLE agent_diary_versions (
            agent TEXT PRIMARY KEY,
            version INTEGER NOT NULL,      -- bumped by every insert, update and delete of its notes
            notes INTEGER NOT NULL         -- how many notes it has
        )
        """)
    for name, when, row, delta in (("inserted", "INSERT", "new", 1), ("deleted", "DELETE", "old", -1),
                                   ("updated", "UPDATE", "new", 0)):
        # one statement each: _run_script splits on the semicolon a trigger's body holds
        conn.execute(f"CREATE TRIGGER agent_diary_{name} AFTER {when} ON agent_diary BEGIN "
                     f"INSERT INTO agent_diary_versions (agent, version, notes) VALUES ({row}.agent, 1, {max(delta, 0)}) "
                     f"ON CONFLICT(agent) DO UPDATE SET version = version + 1, notes = notes + ({delta}); END")


# A migration is known by its name (recorded in _migrations), not its place: m009 landed on main before m008
# did, so a home that ran m009 first runs m008 on its next open. Each stands alone (its own tables), so the
# order they run in does not matter.
def m010_answer_cache(conn: Any) -> None:
    """This node's answers to questions (`crewlet ask`), each kept at the corpus position it was written
    at: a write that moves the pages or vector log's applied position retires it (core/ask/cache.py)."""
    _run_script(conn, """
        CREATE TABLE answer_cache (
            key TEXT PRIMARY KEY,          -- sha256 of the folded question, the spaces read, the model
            pages_seq INTEGER NOT NULL,    -- the applied positions the answer was written at
            vectors_seq INTEGER NOT NULL,
            answer TEXT NOT NULL,          -- JSON: the Answer as first given
            created_at INTEGER NOT NULL,
            used_at INTEGER NOT NULL
        );
        CREATE INDEX answer_cache_used ON answer_cache(used_at)
        """)


def m011_entries(conn: Any) -> None:
    """Spec 003's entries (issue 35): one fact each, under a page, with their citations' checks, corroborations,
    status changes (who and why), serves, and each page's entry policy. Filled by the pages log's entry kinds
    (core/pages/kinds.py); every row under a page goes with it on a purge, by the foreign keys."""
    _run_script(conn, """
        CREATE TABLE entries (
            id TEXT PRIMARY KEY,
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,            -- FACT | DECISION | CONVENTION | GOTCHA
            body TEXT NOT NULL,
            folded TEXT NOT NULL,          -- the body whitespace-folded and lower-cased: what an exact repeat matches
            scope TEXT,                    -- a folder ('apps/server', 'NAME:apps/server'); NULL serves every query
            citations TEXT NOT NULL,       -- JSON: the citations as written (core/repos/citations.py shapes)
            status TEXT NOT NULL,          -- PROPOSED | STANDING | CONSOLIDATED | SUPERSEDED | DISPUTED | ARCHIVED
            author TEXT NOT NULL,
            author_kind TEXT NOT NULL,     -- person | agent | system: decided the status it started with
            created_at INTEGER NOT NULL,
            supersedes TEXT,               -- the entry this one corrects (retired when a person accepts this one)
            superseded_by TEXT,
            verified_by TEXT,              -- a person who verified it: the HUMAN_VERIFIED tier
            verified_at INTEGER,
            status_by TEXT,                -- who changed the status last, when, why
            status_at INTEGER,
            status_reason TEXT,
            version INTEGER NOT NULL       -- the seq of the record that changed the row last
        );
        CREATE INDEX entries_page ON entries(page_id, status);
        CREATE INDEX entries_folded ON entries(folded);
        CREATE INDEX entries_author ON entries(author, page_id, status);
        -- every change of an entry's status (an add, an accept, a verify …): who, when, from what, why
        CREATE TABLE entry_history (
            op_id TEXT NOT NULL,
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            actor TEXT NOT NULL,
            actor_kind TEXT NOT NULL,
            at INTEGER NOT NULL,
            action TEXT NOT NULL,          -- add | edit | accept | verify | dispute | archive | supersede
            from_status TEXT,
            to_status TEXT NOT NULL,
            reason TEXT,
            body_before TEXT,              -- an edit: what the entry said before it (NULL for every other action)
            kind_before TEXT,
            scope_before TEXT,
            PRIMARY KEY (op_id, entry_id)
        );
        CREATE INDEX entry_history_entry ON entry_history(entry_id, seq);
        -- an exact repeat folded into an entry instead of written
        CREATE TABLE entry_corroborations (
            op_id TEXT PRIMARY KEY,
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            actor TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX entry_corroborations_entry ON entry_corroborations(entry_id);
        -- each check of a citation (at write, and by the recheck duty): its last one is the citation's state
        CREATE TABLE citation_checks (
            op_id TEXT NOT NULL,
            idx INTEGER NOT NULL,          -- the citation, 1-based, as the entry lists them
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            result TEXT NOT NULL,          -- held | shifted | moved | changed | gone | not_read_yet
            commit_id TEXT,                -- the commit read
            blob TEXT,                     -- the cited file's blob at that commit
            anchor TEXT,                   -- JSON {path, lines}: where the citation stands now (re-anchored)
            message TEXT,
            checked_at INTEGER NOT NULL,
            PRIMARY KEY (op_id, idx)
        );
        CREATE INDEX citation_checks_entry ON citation_checks(entry_id, idx, seq);
        -- a page's entry policy as people set it, every change kept: the latest is in force (none: CURATED)
        CREATE TABLE page_policies (
            op_id TEXT PRIMARY KEY,
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            policy TEXT NOT NULL,          -- OPEN | CURATED | LOCKED
            set_by TEXT NOT NULL,
            set_at INTEGER NOT NULL
        );
        CREATE INDEX page_policies_page ON page_policies(page_id, seq);
        -- each time an entry was served to someone (which tool, at what rank): decay and the runs read these
        CREATE TABLE entry_serves (
            op_id TEXT NOT NULL,
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            actor TEXT NOT NULL,
            at INTEGER NOT NULL,
            via TEXT NOT NULL,
            query TEXT,
            rank INTEGER NOT NULL,
            run TEXT,
            PRIMARY KEY (op_id, entry_id)
        );
        CREATE INDEX entry_serves_entry ON entry_serves(entry_id, at)
        """)


def m012_page_about(conn: Any) -> None:
    """What a page is about (issue 35: `crewlet page link`): a module, a space or another page, each link and unlink
    kept (the latest row of an item says whether it stands); load_context serves a module's pages first."""
    _run_script(conn, """
        CREATE TABLE page_about (
            op_id TEXT PRIMARY KEY,
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            item_kind TEXT NOT NULL,       -- module | space | page
            item TEXT NOT NULL,            -- a scope (NAME:folder), a space key, a page id
            linked INTEGER NOT NULL,       -- 1 linked, 0 the link removed
            set_by TEXT NOT NULL,
            set_at INTEGER NOT NULL
        );
        CREATE INDEX page_about_page ON page_about(page_id, item_kind, item, seq);
        CREATE INDEX page_about_item ON page_about(item_kind, item, seq)
        """)


def m013_entry_context(conn: Any) -> None:
    """load_context at 100,000 entries (core/bank/context.py): the scopes entries in use hold, and each scope's
    entries newest first — all of them, its conventions, its verified ones — each an index range that the reading
    stops in once it has what it serves. Partial indexes over the entries in use only; the queries write the
    condition as these do, since SQLite's planner matches a partial index's WHERE term by term."""
    _run_script(conn, """
        CREATE INDEX entries_in_use_scope ON entries(scope, created_at)
            WHERE status IN ('STANDING', 'CONSOLIDATED');
        CREATE INDEX entries_in_use_conventions ON entries(scope, created_at)
            WHERE status IN ('STANDING', 'CONSOLIDATED') AND kind = 'CONVENTION';
        CREATE INDEX entries_in_use_verified ON entries(scope, created_at)
            WHERE status IN ('STANDING', 'CONSOLIDATED') AND verified_by IS NOT NULL
        """)


def m014_entries_version(conn: Any) -> None:
    """Entries by the log position that changed them last: the keyword indexer's incremental pass and a search's
    coverage read the entries changed since a position, as they read the pages (pages' own version index)."""
    conn.execute("CREATE INDEX entries_version ON entries(version)")


def m015_triage(conn: Any) -> None:
    """Spec 003's triage (issue 36): each decision triage recorded about an entry, with its inputs; the audits drawn
    from the decisions it acted on; the verdicts people's actions and answers gave those decisions; each change of
    a decision type's back-off state with the figures it was made on. Filled by the pages log's triage kinds and
    the entry kinds' handlers (core/pages/triage_handlers.py); an entry's rows go with it by the foreign keys."""
    _run_script(conn, """
        CREATE TABLE triage_decisions (
            op_id TEXT PRIMARY KEY,        -- the triage.decide record: the decision's id (the audit draw hashes it)
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            entry_version INTEGER NOT NULL,  -- entries.version as triage read it: a later change makes it stale
            seq INTEGER NOT NULL,
            actor TEXT NOT NULL,
            at INTEGER NOT NULL,
            mode TEXT NOT NULL,            -- shadow | on (KNOWLEDGE_AUTO_TRIAGE when it decided)
            decision TEXT NOT NULL,        -- accept | corroborate | refuse | escalate: its type, what kappa compares
            acted INTEGER NOT NULL,        -- 1: it changed the entry (mode on, and no reason held it)
            reasons TEXT NOT NULL,         -- JSON list: the escalation reasons, the holds among them, table order
            held TEXT NOT NULL,            -- JSON list: the holds (UNKNOWN_SOURCE, LOW_AGREEMENT) that kept it from acting
            fold_into TEXT,                -- corroborate: the entry it folds into
            refusal TEXT,                  -- refuse: credential | several_claims
            inputs TEXT NOT NULL,          -- JSON: what it read and what each rule and judgment said (why, for a person)
            audited INTEGER NOT NULL       -- 1: drawn for an audit (an acted acceptance, fold or several-claims refusal)
        );
        CREATE INDEX triage_decisions_entry ON triage_decisions(entry_id, seq);
        CREATE TABLE triage_audits (
            decision_id TEXT PRIMARY KEY REFERENCES triage_decisions(op_id) ON DELETE CASCADE,
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            opened_seq INTEGER NOT NULL,
            answer TEXT,                   -- NULL while open | agree | disagree
            answered_by TEXT,
            answered_at INTEGER,
            answer_op TEXT
        );
        CREATE INDEX triage_audits_open ON triage_audits(answer, opened_seq);
        CREATE TABLE triage_verdicts (
            op_id TEXT NOT NULL,           -- the record whose person's action or answer made it
            decision_id TEXT NOT NULL REFERENCES triage_decisions(op_id) ON DELETE CASCADE,
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            decision TEXT NOT NULL,        -- the decision's type, copied: kappa reads one table
            label TEXT NOT NULL,           -- the person's outcome as a type (triage_model.person_label)
            verdict TEXT NOT NULL,         -- accepted | rejected | edited
            source TEXT NOT NULL,          -- action | audit
            actor TEXT NOT NULL,
            at INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (op_id, decision_id)
        );
        CREATE INDEX triage_verdicts_at ON triage_verdicts(at);
        CREATE TABLE triage_states (
            op_id TEXT PRIMARY KEY,
            decision_type TEXT NOT NULL,   -- accept | corroborate | refuse (escalation never backs off)
            state TEXT NOT NULL,           -- acting | escalating
            figures TEXT NOT NULL,         -- JSON: kappa, verdicts, floor, min_samples, window_days it was made on
            actor TEXT NOT NULL,
            at INTEGER NOT NULL,
            seq INTEGER NOT NULL
        );
        CREATE INDEX triage_states_type ON triage_states(decision_type, seq);
    """)


def m016_runs(conn: Any) -> None:
    """Agent runs (issue 37, spec 003 "What agents get", "The holdout"): each run with its arm and, once finished, its
    outcomes; the review findings its finish carried; each outcome counted helpful or harmful for an entry served to
    it (an entry's rows go with it by the foreign key); the serves of a run found by its id. Filled by the pages
    log's run kinds (core/pages/run_handlers.py)."""
    _run_script(conn, """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,           -- the runtime's id for the run
            agent TEXT NOT NULL,
            issue TEXT,
            modules TEXT NOT NULL,         -- JSON list of scopes (NAME:folder) the run works in
            arm TEXT NOT NULL,             -- treatment | holdout, drawn from the id at start
            holdout_rate REAL NOT NULL,    -- KNOWLEDGE_HOLDOUT_RATE the arm was drawn at
            started_by TEXT NOT NULL,
            started_at INTEGER NOT NULL,
            start_op TEXT NOT NULL,
            finish_op TEXT,                -- NULL while the run is under way
            finished_by TEXT,
            finished_at INTEGER,
            checks TEXT,                   -- passed | failed
            review TEXT,                   -- passed | failed
            pr TEXT,                       -- merged | closed | none
            cost REAL                      -- USD, when reported
        );
        CREATE INDEX runs_finished ON runs(arm, finished_at);
        CREATE TABLE run_findings (
            op_id TEXT NOT NULL,           -- the run.finish that carried it
            idx INTEGER NOT NULL,
            run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            module TEXT NOT NULL,
            text TEXT NOT NULL,
            PRIMARY KEY (op_id, idx)
        );
        CREATE INDEX run_findings_module ON run_findings(module, run_id);
        CREATE TABLE entry_outcomes (
            op_id TEXT NOT NULL,           -- the run.finish that counted it
            entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            outcome TEXT NOT NULL,         -- checks | review | pr
            effect TEXT NOT NULL,          -- helpful | harmful
            run_id TEXT NOT NULL,
            at INTEGER NOT NULL,
            PRIMARY KEY (op_id, entry_id, outcome)
        );
        CREATE INDEX entry_outcomes_entry ON entry_outcomes(entry_id, effect);
        CREATE INDEX entry_serves_run ON entry_serves(run) WHERE run IS NOT NULL
        """)


def m017_upkeep(conn: Any) -> None:
    """Upkeep (issue 37, spec 003 "Upkeep"): each question the bank could not answer, keyed by its fold; each issue
    upkeep filed (a knowledge gap's, an archived convention's), once per subject. Filled by the pages log's upkeep
    kinds (core/pages/upkeep_handlers.py). `page` is a GAPS page's id, kept when the page is purged: the issue was
    filed."""
    _run_script(conn, """
        CREATE TABLE gap_asks (
            op_id TEXT PRIMARY KEY,        -- the knowledge.gap record
            gap_key TEXT NOT NULL,         -- the question folded (upkeep_handlers.fold_text)
            question TEXT NOT NULL,        -- as asked, whitespace folded
            via TEXT NOT NULL,             -- ask | recall_knowledge
            actor TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX gap_asks_key ON gap_asks(gap_key, at);
        CREATE TABLE upkeep_issues (
            op_id TEXT PRIMARY KEY,        -- the upkeep.issue record
            subject TEXT NOT NULL UNIQUE,  -- gap:<fold> | convention:<entry id>:<archive op>
            kind TEXT NOT NULL,            -- gap | convention
            space TEXT NOT NULL,           -- the space (Plane: the project) it was filed with
            title TEXT NOT NULL,
            ref TEXT NOT NULL,             -- Plane: PROJECT-N; else the GAPS page's address
            url TEXT,                      -- Plane: the issue's URL
            page TEXT,                     -- else: the GAPS page's id
            actor TEXT NOT NULL,
            at INTEGER NOT NULL
        )
        """)


def m018_consolidation(conn: Any) -> None:
    """Consolidation (issue 37, spec 003 "Consolidation"): a proposal to fold a page's entries into its body — the
    new body, the entries it folds, the revision it was made against — and what became of it (accepted, declined,
    reverted, the revert undone), one row per decision in `consolidation_decisions`. Filled by the pages log's
    consolidation kinds (core/pages/consolidation_handlers.py); a proposal's rows go with its page."""
    _run_script(conn, """
        CREATE TABLE consolidation_proposals (
            id TEXT PRIMARY KEY,
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            base_revision INTEGER NOT NULL,  -- the page's revision the proposal was made against
            body TEXT NOT NULL,              -- the page's new body
            entries TEXT NOT NULL,           -- JSON list of the entry ids it folds, in the writer's order
            message TEXT,
            proposed_by TEXT NOT NULL,
            proposed_kind TEXT NOT NULL,     -- person | agent
            proposed_at INTEGER NOT NULL,
            propose_op TEXT NOT NULL,
            state TEXT NOT NULL,             -- OPEN | ACCEPTED | DECLINED | REVERTED
            old_body TEXT,                   -- the body the accepted save replaced (what a revert restores)
            applied_revision INTEGER,        -- the revision the accepted save (or the revert undone) made
            reverted_revision INTEGER,       -- the revision the revert made
            folded TEXT,                     -- JSON list: the entries the latest accept (or undo) made CONSOLIDATED
            version INTEGER NOT NULL         -- the seq of the record that changed it last
        );
        CREATE INDEX consolidation_open ON consolidation_proposals(state, proposed_at);
        CREATE INDEX consolidation_page ON consolidation_proposals(page_id);
        CREATE TABLE consolidation_decisions (
            op_id TEXT PRIMARY KEY,
            proposal_id TEXT NOT NULL REFERENCES consolidation_proposals(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            action TEXT NOT NULL,            -- accept | decline | revert | undo_revert
            actor TEXT NOT NULL,
            actor_kind TEXT NOT NULL,
            at INTEGER NOT NULL,
            revision INTEGER                 -- the page's revision the decision's save made (none for a decline)
        );
        CREATE INDEX consolidation_decisions_proposal ON consolidation_decisions(proposal_id, seq)
    """)


def m019_generated_pages(conn: Any) -> None:
    """Generated pages (issue 37, spec 003 "Generated pages"): a page the server writes from the entries in its
    scope — its question (numbered: every new one gets its own build), whether it is still generated or was taken
    over by a person, and its last build; and each build's sections (their text, the entries each cites and what
    each was written from), keyed by the revision the build saved, with the body's digest so a revert to an earlier
    body finds that body's sections again."""
    _run_script(conn, """
        CREATE TABLE generated_pages (
            page_id TEXT PRIMARY KEY REFERENCES pages(id) ON DELETE CASCADE,
            question TEXT NOT NULL,
            question_no INTEGER NOT NULL,     -- 1 at creation, +1 at each changed question
            state TEXT NOT NULL,              -- generated | authored (taken over by a person)
            set_by TEXT NOT NULL,
            set_at INTEGER NOT NULL,
            built_at INTEGER,                 -- the calendar instant of the last build that was applied
            built_question_no INTEGER NOT NULL DEFAULT 0,
            inputs_digest TEXT,               -- the scope's entries as the last build read them
            version INTEGER NOT NULL
        );
        CREATE TABLE generated_builds (
            op_id TEXT PRIMARY KEY,           -- the page.build record that wrote it
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            revision INTEGER NOT NULL,        -- the page's revision after the build (a new one when the body changed)
            saved INTEGER NOT NULL,           -- 1: the build saved a new body
            body_sha TEXT NOT NULL,
            question_no INTEGER NOT NULL,
            sections TEXT NOT NULL,           -- JSON: [{id, text, entries, inputs: {question, entries: {id: body}}}]
            digest TEXT NOT NULL,             -- the scope's entries in use as the build read them
            built_by TEXT NOT NULL,
            built_at INTEGER NOT NULL
        );
        CREATE INDEX generated_builds_body ON generated_builds(page_id, body_sha, seq);
        -- each make, question and takeover of a generated page, as its record said it (a repair gives one back)
        CREATE TABLE generated_changes (
            op_id TEXT PRIMARY KEY,
            page_id TEXT NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            action TEXT NOT NULL,
            question TEXT,
            by_kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        """)


MIGRATIONS: list[Migration] = [m001_pages, m002_read_context, m003_duties, m004_vectors, m005_log_position_digest,
                               m006_vector_reads, m007_semantic_index, m008_counts, m009_agent_diary,
                               m010_answer_cache, m011_entries, m012_page_about, m013_entry_context,
                               m014_entries_version, m015_triage, m016_runs, m017_upkeep, m018_consolidation,
                               m019_generated_pages]


def migrate(conn: Any) -> list[str]:
    """Run every migration not yet recorded, each in its own transaction. Returns the names run."""
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    ran = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # another process may have migrated while we waited for the lock
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (fn.__name__,)).fetchone():
                conn.execute("COMMIT")
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, now_ms()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        ran.append(fn.__name__)
    return ran
