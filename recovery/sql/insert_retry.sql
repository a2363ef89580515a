{{/*
insert_retry: writes the attempts row of an operator's manual retry of
an instance that had none: manual retry 1, retried, with the retries
its retries at once made (their events', eventCases) (Repairer.Retry,
operator.go).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, instance, task  the row's key
  cause                     interrupt or failure
  left_in                   the state the instance was moved from
  reason                    the row's last reason
  attempt, nodes            the retries made, the nodes interrupted on
  last_node                 the last of them (NULL: none)
*/ -}}
INSERT INTO {{.Attempts}} (workflow, instance, task, attempt, manual, state, cause, left_in, last_attempt_at, last_reason, nodes, last_node)
VALUES ({{arg "workflow"}}, {{arg "instance"}}, {{arg "task"}}, {{arg "attempt"}}, 1, 'retried', {{arg "cause"}}, {{arg "left_in"}}, now(), {{arg "reason"}},
	{{arg "nodes"}}, {{arg "last_node"}})
