-- Events are appended in time order: a BRIN index on at finds the
-- events of a time range (GET /v1/events?since=&until=, the events of a
-- run between its start and end) for a few pages of index.
CREATE INDEX events_at_brin ON events USING brin (at);
