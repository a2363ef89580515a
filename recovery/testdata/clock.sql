-- clock
SELECT now()
