{{/*
read_pause: the pause switch, the table's one row, as a Pause
(Pauses.Read, Pauses.Current).

No parameters.
*/ -}}
SELECT {{.Columns}} FROM {{.Pause}}
