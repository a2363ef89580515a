{{/*
per_minute: the events since a time, counted by minute (from that time
on) and kind (Log.PerMinute, the console's day). Every kind is counted: a
filter on kind cost more than the counts of the few kinds the caller
does not draw.

Parameters (numbered $1, $2, … in the order they first appear):
  since  the window's start
*/ -}}
SELECT date_bin(make_interval(mins => 1), at, {{arg "since"}}) AS minute, kind, count(*) AS count
FROM {{.Events}}
WHERE at >= {{arg "since"}}
GROUP BY 1, 2
