-- Retries at once of an interruption write no attempts row (their event
-- holds the attempt); the check settles them from the events after a
-- cursor per task: the last event id its settle pass went past with no
-- case of the task left open before it. A repair writes its task's
-- cursor, just before its first such event, when there is none yet.
CREATE TABLE settle_cursors (
    workflow text NOT NULL,
    task     text NOT NULL,
    after_id bigint NOT NULL,
    PRIMARY KEY (workflow, task)
);
