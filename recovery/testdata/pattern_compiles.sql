-- pattern_compiles
-- $1 pattern
SELECT '' ~ $1
