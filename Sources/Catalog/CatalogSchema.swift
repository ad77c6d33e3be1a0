/// The catalog's schema, as numbered migrations. `PRAGMA user_version` holds the number of the
/// last one applied; each runs in one transaction with the version bump, so a file is never
/// half-migrated. docs/catalog.md documents every table and view; a change here is a new
/// migration, never an edit of an old one.
enum CatalogSchema {
    /// The version this build writes and reads.
    static var version: Int { migrations.count }

    static let migrations: [String] = [
        version1, version2, version3, version4, version5, version6, version7, version8, version9, version10, version11,
        version12, version13, version14, version15, version16,
    ]

    /// Version 16: the runs of a stop reason newest first, from an index (`logs_by_stop`). A
    /// filter on a stop reason few runs have (`runs --stop budget_exhausted`, `serve`'s
    /// `?stop=…`) walked every run newest first to find the few: over a million runs and none
    /// matching, every row (2–5 s). With one reason (or `running`) the index gives its runs in
    /// the list's order, so the walk stops at the page; with several, or with another filter an
    /// index answers, `RunQuery.stopLead` chooses the index to follow.
    static let version16 = """
        CREATE INDEX logs_by_stop ON logs (stop_reason, started_at_us DESC, path);
        """

    /// Version 15: what a merged suite run was made of — `sha256` of the reports `results merge
    /// --add-to-catalog` merged (`inputs_digest`; NULL for a suite run `run` recorded) — so that
    /// merging the same reports again (a CI job run again) finds the suite run it recorded and
    /// records none: one pass counted five times released a quarantine.
    static let version15 = """
        ALTER TABLE suite_runs ADD COLUMN inputs_digest TEXT;
        CREATE UNIQUE INDEX suite_runs_by_inputs ON suite_runs (inputs_digest) WHERE inputs_digest IS NOT NULL;
        """

    /// Version 14: the set of tools each run executed, kept once per distinct set. `tool_sets`
    /// holds each set (`tools`, a JSON array of the names in byte order) and `tool_set_members`
    /// its tools; `logs.tool_set` names the run's. `runs --not-tool Y` (and `--tool X` without
    /// call filters) is then a look at the run's row, not a probe of its calls per candidate: the
    /// sets that qualify are found in the small dictionary first. Filled here from the calls of
    /// every indexed log (`toolSetsFromCalls`).
    static let version14 = """
        CREATE TABLE tool_sets (
            set_id INTEGER PRIMARY KEY,
            tools TEXT NOT NULL UNIQUE
        ) STRICT;
        CREATE TABLE tool_set_members (
            tool TEXT NOT NULL,
            set_id INTEGER NOT NULL REFERENCES tool_sets (set_id),
            PRIMARY KEY (tool, set_id)
        ) STRICT, WITHOUT ROWID;
        ALTER TABLE logs ADD COLUMN tool_set INTEGER REFERENCES tool_sets (set_id);

        \(toolSetsFromCalls)

        CREATE INDEX logs_by_tool_set ON logs (tool_set, started_at_us);
        """

    /// Gives every run in `logs` the set of tools its `calls` rows show executed (`attempts >
    /// 0`): the sets made and their members listed where new. Version 14's filling, and what a
    /// catalog whose rows were loaded by SQL runs to derive them (`Catalog.deriveToolSets`).
    /// The names are put in byte order before they are made into an array, as `ToolSets` does.
    static let toolSetsFromCalls = toolSetsFromCallsStatements.joined(separator: ";\n") + ";"

    /// `toolSetsFromCalls` a statement each, for a connection that runs one at a time.
    static let toolSetsFromCallsStatements = [
        """
        CREATE TEMP TABLE run_tool_sets (log_id INTEGER PRIMARY KEY, tools TEXT NOT NULL)
        """,
        """
        INSERT INTO run_tool_sets (log_id, tools)
            SELECT l.log_id, (
                SELECT json_group_array(tool) FROM (
                    SELECT DISTINCT c.tool FROM calls c WHERE c.log_id = l.log_id AND c.attempts > 0 ORDER BY c.tool
                )
            ) AS tools
            FROM logs l
        """,
        """
        INSERT OR IGNORE INTO tool_sets (tools) SELECT DISTINCT tools FROM run_tool_sets ORDER BY tools
        """,
        """
        INSERT OR IGNORE INTO tool_set_members (tool, set_id) SELECT j.value, s.set_id FROM tool_sets s, json_each(s.tools) j
        """,
        """
        UPDATE logs SET tool_set = (
            SELECT s.set_id FROM tool_sets s WHERE s.tools = (SELECT r.tools FROM run_tool_sets r WHERE r.log_id = logs.log_id)
        )
        """,
        """
        DROP TABLE run_tool_sets
        """,
    ]

    /// Version 13: one record per log file. `log_files` holds each file's identity (size,
    /// modification time, tail checksum), its content hash when known, and a generation that
    /// counts the times its bytes changed; a log's row in `logs`, its facts and its step table
    /// refer to that record (`file_id`) and keep the generation they were made at, valid while it
    /// is the record's (`LogFileRecord`). Before, each of the three kept identity columns of its
    /// own, and a log given a new modification time by a checkout was three updates. Identities
    /// and content hashes are carried from `logs`; from `facts` for a path `logs` does not have,
    /// or whose row version 12 marked to be read again (size -1), the record then of generation 2
    /// and the run's row of 1 (read again by the next `index`). Facts made from the bytes the
    /// record names are kept with their check results; step tables, which `replay` makes again
    /// on first use, start empty.
    static let version13 = """
        CREATE TABLE log_files (
            file_id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            generation INTEGER NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            tail_offset INTEGER NOT NULL,
            tail_end INTEGER NOT NULL,
            tail_hash TEXT NOT NULL,
            content_hash TEXT
        ) STRICT;
        INSERT INTO log_files (file_id, path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash, content_hash)
            SELECT log_id, path, 1, size, mtime_ns, tail_offset, tail_end, tail_hash, content_hash FROM logs;
        INSERT INTO log_files (path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash, content_hash)
            SELECT path, 1, size, mtime_ns, tail_offset, tail_end, tail_hash, content_hash FROM facts
            WHERE path NOT IN (SELECT path FROM log_files);
        UPDATE log_files SET generation = 2, size = x.size, mtime_ns = x.mtime_ns, tail_offset = x.tail_offset, tail_end = x.tail_end,
            tail_hash = x.tail_hash, content_hash = x.content_hash
            FROM facts x WHERE x.path = log_files.path AND log_files.size = -1 AND x.size >= 0;
        UPDATE log_files SET content_hash = x.content_hash
            FROM facts x WHERE x.path = log_files.path AND log_files.content_hash IS NULL AND x.size = log_files.size
                AND x.mtime_ns = log_files.mtime_ns AND x.tail_offset = log_files.tail_offset AND x.tail_end = log_files.tail_end
                AND x.tail_hash = log_files.tail_hash;
        CREATE INDEX log_files_by_content ON log_files (content_hash) WHERE content_hash IS NOT NULL;

        ALTER TABLE logs ADD COLUMN file_id INTEGER REFERENCES log_files (file_id) ON DELETE CASCADE;
        ALTER TABLE logs ADD COLUMN generation INTEGER NOT NULL DEFAULT 1;
        UPDATE logs SET file_id = log_id;
        DROP INDEX logs_by_content;
        ALTER TABLE logs DROP COLUMN size;
        ALTER TABLE logs DROP COLUMN mtime_ns;
        ALTER TABLE logs DROP COLUMN tail_offset;
        ALTER TABLE logs DROP COLUMN tail_end;
        ALTER TABLE logs DROP COLUMN tail_hash;
        ALTER TABLE logs DROP COLUMN content_hash;
        CREATE UNIQUE INDEX logs_by_file ON logs (file_id);

        CREATE TABLE facts_by_file (
            file_id INTEGER PRIMARY KEY REFERENCES log_files (file_id) ON DELETE CASCADE,
            generation INTEGER NOT NULL,
            extractor_version INTEGER NOT NULL,
            facts BLOB NOT NULL
        ) STRICT;
        INSERT INTO facts_by_file (file_id, generation, extractor_version, facts)
            SELECT f.file_id, f.generation, x.extractor_version, x.facts FROM facts x JOIN log_files f ON f.path = x.path
            WHERE f.size = x.size AND f.mtime_ns = x.mtime_ns AND f.tail_offset = x.tail_offset AND f.tail_end = x.tail_end
                AND f.tail_hash = x.tail_hash;
        CREATE TABLE check_results_by_file (
            file_id INTEGER NOT NULL REFERENCES facts_by_file (file_id) ON DELETE CASCADE,
            case_key TEXT NOT NULL,
            generation INTEGER NOT NULL,
            result TEXT NOT NULL,
            PRIMARY KEY (file_id, case_key)
        ) STRICT, WITHOUT ROWID;
        INSERT INTO check_results_by_file (file_id, case_key, generation, result)
            SELECT x.file_id, r.case_key, x.generation, r.result FROM check_results r JOIN log_files f ON f.path = r.path
            JOIN facts_by_file x ON x.file_id = f.file_id;
        DROP TABLE check_results;
        DROP TABLE facts;
        ALTER TABLE facts_by_file RENAME TO facts;
        ALTER TABLE check_results_by_file RENAME TO check_results;
        CREATE INDEX facts_current ON facts (file_id, generation, extractor_version);
        CREATE INDEX check_results_by_case ON check_results (case_key);

        DROP TABLE steps;
        DROP TABLE step_logs;
        CREATE TABLE step_logs (
            file_id INTEGER PRIMARY KEY REFERENCES log_files (file_id) ON DELETE CASCADE,
            generation INTEGER NOT NULL,
            format INTEGER NOT NULL,
            run_id TEXT NOT NULL,
            steps INTEGER NOT NULL,
            digests_checked INTEGER NOT NULL,
            digest_mismatches INTEGER NOT NULL
        ) STRICT;
        CREATE TABLE steps (
            file_id INTEGER NOT NULL REFERENCES step_logs (file_id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            step INTEGER NOT NULL,
            has_problem INTEGER NOT NULL,
            record TEXT NOT NULL,
            PRIMARY KEY (file_id, ordinal)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX steps_by_step ON steps (file_id, step, ordinal);
        """

    /// Version 12: `logs.steps` counts the steps the agent's model decided in
    /// (`RunState.decisionStepCount`), as `maxSteps` and a run's summary count them; before, it
    /// was the last event's step, which a recording's proxy verdicts and approval waits grow. The
    /// rows written before are marked changed (no size, no resume point, no content hash), so the
    /// next `index` reads every log again and writes the new count.
    static let version12 = """
        UPDATE logs SET size = -1, resume = NULL, content_hash = NULL;
        """

    /// Version 11: a log known by its content as well as by its path, for a catalog that many
    /// machines share. `logs.content_hash` and `facts.content_hash` are the SHA-256 of the file's
    /// bytes when it was read (`LogFingerprint.contentHash`; in `logs`, NULL for a run that can
    /// still grow, which would be hashed whole at every index), so a log seen again at another
    /// path or on another machine, or with a new
    /// modification time after a checkout, is recognised without being read; `logs.seen_on` is
    /// the runner or host that last indexed the log (`seen_at` in `runs --json` is the URI
    /// `file://SEEN_ON/PATH`). NULL in rows written before; `catalog rebuild` fills them.
    /// `facts_identity` takes the content hash too, so a suite's kept results still read every
    /// identity from the index, never from the rows that hold the state blobs.
    static let version11 = """
        ALTER TABLE logs ADD COLUMN content_hash TEXT;
        ALTER TABLE logs ADD COLUMN seen_on TEXT;
        CREATE INDEX logs_by_content ON logs (content_hash) WHERE content_hash IS NOT NULL;
        ALTER TABLE facts ADD COLUMN content_hash TEXT;
        CREATE INDEX facts_by_content ON facts (content_hash, extractor_version) WHERE content_hash IS NOT NULL;
        DROP INDEX facts_identity;
        CREATE INDEX facts_identity ON facts (path, extractor_version, size, mtime_ns, tail_offset, tail_end, tail_hash, content_hash);
        """

    /// Version 10: where a suite run ran — the runner (the CI's name for it, else the host) and
    /// the CI's link to the job — so a history gathered from many machines (`catalog merge`, a
    /// CI fleet) says which one each result came from. NULL for suite runs recorded before.
    static let version10 = """
        ALTER TABLE suite_runs ADD COLUMN runner TEXT;
        ALTER TABLE suite_runs ADD COLUMN ci_job TEXT;
        DROP VIEW case_history;
        CREATE VIEW case_history AS
            SELECT s.suite_run_id, s.started_at_us, s.git_commit, s.git_branch, s.shard, s.runner, s.ci_job, r.*
            FROM case_results r JOIN suite_runs s USING (suite_run_id);
        """

    /// Version 9: the run a log forked (`agent-eval fork`, its `run_forked` event) and the
    /// parent's step it continued after, so `runs --forks-of RUN` finds a run's forks. NULL for
    /// a run that is no fork; a log indexed before is read again only when it changes, and no
    /// log written before version 9 was a fork.
    static let version9 = """
        ALTER TABLE logs ADD COLUMN forked_from TEXT;
        ALTER TABLE logs ADD COLUMN fork_step INTEGER;
        CREATE INDEX logs_by_parent ON logs (forked_from) WHERE forked_from IS NOT NULL;
        """

    /// Version 8: the step table of each log (`replay --step`, the interactive replay), which
    /// lived in a file of its own format in a cache directory before. `index` fills it in the
    /// pass it makes over a log read from its start, and `replay` when it finds none that fits
    /// the file. `step_logs` holds the identity of the file the steps were made from and the
    /// version of their records (`StepTable.format`); anything else is made again.
    static let version8 = """
        CREATE TABLE step_logs (
            path TEXT PRIMARY KEY,
            format INTEGER NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            tail_offset INTEGER NOT NULL,
            tail_end INTEGER NOT NULL,
            tail_hash TEXT NOT NULL,
            run_id TEXT NOT NULL,
            steps INTEGER NOT NULL,
            digests_checked INTEGER NOT NULL,
            digest_mismatches INTEGER NOT NULL
        ) STRICT;

        CREATE TABLE steps (
            path TEXT NOT NULL REFERENCES step_logs (path) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            step INTEGER NOT NULL,
            has_problem INTEGER NOT NULL,
            record TEXT NOT NULL,
            PRIMARY KEY (path, ordinal)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX steps_by_step ON steps (path, step, ordinal);
        """

    /// Version 7: the digest of each case's file as the suite run found it. `history` called a
    /// case flaky when it passed once and then failed twice on the same commit after its file
    /// was edited: flakiness is mixed outcomes of the same case on the same code, so a series
    /// of results ends where the file's digest or the commit changes. NULL for older rows and
    /// for a file that could not be read.
    static let version7 = """
        ALTER TABLE case_results ADD COLUMN file_digest TEXT;
        """

    /// Version 6: one index on `calls` beside its primary key instead of two. `calls_by_tool
    /// (tool, attempts, log_id)` found a tool's calls and `calls_by_log_tool (log_id, tool,
    /// attempts)` probed a run's calls by tool; `calls_by_tool_log (tool, log_id, attempts)` does
    /// both (the probe gives both leading columns, the tool's executed calls are one range with
    /// `attempts` read from the index), and indexing a call updates two B-trees, not three.
    static let version6 = """
        DROP INDEX calls_by_log_tool;
        DROP INDEX calls_by_tool;
        CREATE INDEX calls_by_tool_log ON calls (tool, log_id, attempts);
        """

    /// Version 5: no index on `eval_results.log_path`. A suite run appends its rows in one place
    /// (the primary key starts with its id), but that index put each row beside the older rows
    /// of the same log, so recording a suite of 1,000 logs wrote about 1,000 scattered index
    /// pages once a few dozen suite runs were kept, and a cached `run` took 30–60% longer after
    /// 100 of them. Nothing in agent-eval looks results up by log; a query that does scans.
    static let version5 = """
        DROP INDEX eval_results_by_log;
        """

    /// Version 4: a suite's kept check results are read with the identities of their facts in
    /// one query per case (FactCache). `facts` keeps its state blob in its rows, so that query
    /// read every page of it; this index holds the identity alone, and the other finds a case's
    /// results without scanning every case's.
    static let version4 = """
        CREATE INDEX facts_identity ON facts (path, extractor_version, size, mtime_ns, tail_offset, tail_end, tail_hash);
        CREATE INDEX check_results_by_case ON check_results (case_key);
        """

    /// Version 3: what judge models were asked and replied for each eval result (model-graded
    /// expectations), as the JSON report's `judgements` array.
    static let version3 = """
        ALTER TABLE eval_results ADD COLUMN judgements TEXT NOT NULL DEFAULT '[]';
        """

    /// Version 2: the runs query's two shapes (RunQuery) — newest first straight from an index
    /// with per-run probes into a run's calls by tool, or driven by a rare tool's calls — and
    /// check results kept beside the facts they were made from.
    static let version2 = """
        DROP INDEX logs_by_start;
        CREATE INDEX logs_by_start ON logs (started_at_us DESC, path);
        CREATE INDEX calls_by_log_tool ON calls (log_id, tool, attempts);

        CREATE TABLE check_results (
            path TEXT NOT NULL REFERENCES facts (path) ON DELETE CASCADE,
            case_key TEXT NOT NULL,
            result TEXT NOT NULL,
            PRIMARY KEY (path, case_key)
        ) STRICT, WITHOUT ROWID;
        """

    static let version1 = """
        CREATE TABLE logs (
            log_id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            tail_offset INTEGER NOT NULL,
            tail_end INTEGER NOT NULL,
            tail_hash TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('intact', 'torn', 'damaged', 'vanished')),
            problem TEXT,
            run_id TEXT,
            agent TEXT,
            agent_version TEXT,
            model TEXT,
            input TEXT,
            started_at_us INTEGER,
            ended_at_us INTEGER,
            stop_reason TEXT,
            stop_limit TEXT,
            events INTEGER NOT NULL,
            steps INTEGER NOT NULL,
            decisions INTEGER NOT NULL,
            invalid_decisions INTEGER NOT NULL,
            tool_calls INTEGER NOT NULL,
            executed_calls INTEGER NOT NULL,
            denied_calls INTEGER NOT NULL,
            failed_calls INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cost_usd REAL NOT NULL,
            anomalies INTEGER NOT NULL,
            indexed_at_us INTEGER NOT NULL,
            resume BLOB
        ) STRICT;
        CREATE INDEX logs_by_start ON logs (started_at_us);
        CREATE INDEX logs_by_agent ON logs (agent, started_at_us);
        CREATE INDEX logs_by_run ON logs (run_id);

        CREATE TABLE calls (
            log_id INTEGER NOT NULL REFERENCES logs (log_id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            run_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            verdict TEXT,
            rule TEXT,
            approval TEXT CHECK (approval IN ('granted', 'refused')),
            approver TEXT,
            attempts INTEGER NOT NULL,
            status TEXT,
            duration_us INTEGER NOT NULL,
            error TEXT,
            PRIMARY KEY (log_id, ordinal)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX calls_by_tool ON calls (tool, attempts, log_id);

        CREATE TABLE facts (
            path TEXT PRIMARY KEY,
            extractor_version INTEGER NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            tail_offset INTEGER NOT NULL,
            tail_end INTEGER NOT NULL,
            tail_hash TEXT NOT NULL,
            facts BLOB NOT NULL
        ) STRICT, WITHOUT ROWID;

        CREATE TABLE suite_runs (
            suite_run_id INTEGER PRIMARY KEY,
            started_at_us INTEGER NOT NULL,
            duration_ms INTEGER NOT NULL,
            git_commit TEXT,
            git_branch TEXT,
            command_line TEXT NOT NULL,
            origin TEXT NOT NULL CHECK (origin IN ('run', 'merge')),
            shard TEXT,
            cases INTEGER NOT NULL,
            passed INTEGER NOT NULL,
            failed INTEGER NOT NULL,
            errors INTEGER NOT NULL,
            k INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX suite_runs_by_start ON suite_runs (started_at_us);

        CREATE TABLE case_results (
            suite_run_id INTEGER NOT NULL REFERENCES suite_runs (suite_run_id) ON DELETE CASCADE,
            case_id TEXT NOT NULL,
            file TEXT,
            source TEXT NOT NULL CHECK (source IN ('recorded', 'live')),
            outcome TEXT NOT NULL,
            runs INTEGER NOT NULL,
            passed_runs INTEGER NOT NULL,
            pass_rate REAL NOT NULL,
            pass_hat_k REAL,
            stability TEXT NOT NULL,
            baseline_status TEXT,
            error TEXT,
            PRIMARY KEY (suite_run_id, case_id)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX case_results_by_case ON case_results (case_id, suite_run_id);

        CREATE TABLE eval_results (
            suite_run_id INTEGER NOT NULL REFERENCES suite_runs (suite_run_id) ON DELETE CASCADE,
            case_id TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            log_path TEXT NOT NULL,
            live INTEGER NOT NULL,
            repeat_index INTEGER NOT NULL,
            outcome TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'error')),
            stop_reason TEXT,
            steps INTEGER,
            tokens INTEGER,
            error TEXT,
            failures TEXT NOT NULL,
            PRIMARY KEY (suite_run_id, case_id, ordinal)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX eval_results_by_log ON eval_results (log_path);

        CREATE VIEW run_calls AS
            SELECT l.path, l.agent, l.model, l.started_at_us, l.stop_reason, c.*
            FROM calls c JOIN logs l USING (log_id);

        CREATE VIEW unapproved_calls AS
            SELECT l.path, l.agent, c.run_id, c.step, c.call_id, c.tool, c.arguments, c.verdict, c.rule
            FROM calls c JOIN logs l USING (log_id)
            WHERE c.attempts > 0 AND (c.approval IS NULL OR c.approval <> 'granted');

        CREATE VIEW denied_calls AS
            SELECT l.path, l.agent, c.run_id, c.step, c.call_id, c.tool, c.arguments, c.verdict, c.rule, c.approval
            FROM calls c JOIN logs l USING (log_id)
            WHERE c.verdict = 'deny' OR c.approval = 'refused';

        CREATE VIEW case_history AS
            SELECT s.suite_run_id, s.started_at_us, s.git_commit, s.git_branch, s.shard, r.*
            FROM case_results r JOIN suite_runs s USING (suite_run_id);

        CREATE VIEW tool_usage AS
            SELECT tool, COUNT(*) AS calls, COUNT(CASE WHEN attempts > 0 THEN 1 END) AS executed,
                COUNT(CASE WHEN attempts > 0 AND (status IS NULL OR status <> 'ok') THEN 1 END) AS failed,
                COUNT(CASE WHEN verdict = 'deny' OR approval = 'refused' THEN 1 END) AS denied,
                SUM(duration_us) AS total_duration_us
            FROM calls GROUP BY tool;
        """
}
