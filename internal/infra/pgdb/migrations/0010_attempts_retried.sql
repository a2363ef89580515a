-- Retries under way: the attempts rows of instances moved back to begin
-- (state retried), which the check settles once their outcome is known
-- (succeeded, failed, or cancelled when the instance is gone). The
-- partial index keeps that step proportional to the retries under way,
-- not to every row ever written.
CREATE INDEX attempts_retried_idx ON attempts (workflow, task, instance) WHERE state = 'retried';
