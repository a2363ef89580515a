-- The updated_column value of the failure an on_failure decision was made
-- on: a pass skips a failed instance whose stamp is unchanged since its
-- decision, even when the engine stamped it ahead of the database clock.
ALTER TABLE attempts ADD COLUMN stamp timestamptz;
