-- What a node's own interruptions still justify (when one of them turns
-- out to be an instance's problem, interrupted on other nodes too) counts
-- only the interruptions since its grade was last cleared: an operator's
-- reset-grade or the quiet period forgives the ones before. NULL: never
-- cleared.
ALTER TABLE node_grades ADD COLUMN counts_from timestamptz;
