{{/*
current_term: the recorded fencing term, who holds it and since when
(Fence.Current).

No parameters.
*/ -}}
SELECT term, node, incarnation, since FROM {{.Terms}}
