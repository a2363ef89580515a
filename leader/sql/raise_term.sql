{{/*
raise_term: records the office's term, only upwards (Fence.TakeOffice,
after previous_term; no row changed: the term recorded is not older).
Recording it fences every earlier master's writes: their fenced
transactions find a term that is not theirs (check_term).

Parameters (numbered $1, $2, … in the order they first appear):
  term         the office's term (the etcd election's revision)
  node         the node taking office
  incarnation  its incarnation
*/ -}}
UPDATE {{.Terms}} SET term = {{arg "term"}}, node = {{arg "node"}}, incarnation = {{arg "incarnation"}}, since = now()
WHERE term < {{arg "term"}}
