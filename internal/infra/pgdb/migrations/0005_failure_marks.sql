-- on_failure policies: where each task's search for new failures starts.
-- The row is written when the task's policy is first applied, with the
-- database clock as its mark: failures from before are never retried
-- automatically. Each check pass reads the task's failed instances whose
-- updated_column is at or above the mark (through the engine's index on
-- (status, updated_column)), then moves the mark to 10 s before the pass,
-- so that a failure committed a little after its timestamp is still read;
-- one already decided is skipped by its attempts row. The row is deleted
-- when the task's policy is removed: a policy added again starts afresh.
CREATE TABLE failure_marks (
    workflow text        NOT NULL,
    task     text        NOT NULL,
    mark     timestamptz NOT NULL,
    since    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow, task)
);
