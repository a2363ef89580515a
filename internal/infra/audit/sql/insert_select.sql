{{/*
insert_select: one event per row of a FROM clause, at the database
clock's now (Log.InsertSelect, rendered at each call as a fragment: a
statement the caller runs, or sets in its own, to write many events in
the statement of the change they record). Columns: the columns given,
Values: their SQL expressions over From, in that order (a column not
given is NULL).

No parameters of its own: the expressions and From hold the caller's
(numbered by the caller, or sqltext.Arg marks its statement numbers).
*/ -}}
INSERT INTO {{.Events}} ({{.Columns}}) SELECT {{.Values}} FROM {{.From}}
