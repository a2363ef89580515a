-- The engine tables the example configuration (enginehealth.yaml) names,
-- for a first run: a claimable workflow "invoice" (billing.invoice and its
-- claims table) and a workflow "report" without claims (reports). Your
-- engine's own tables replace them; the claims table's layout is the
-- claim protocol's (https://github.com/enginehealth/enginehealth/blob/main/docs/claim-protocol.md).
--
--   psql "$ENGINEHEALTH_DSN" -f example-tables.sql
--
-- The packages install this file as
-- /usr/share/doc/enginehealth/examples/example-tables.sql.
CREATE SCHEMA IF NOT EXISTS billing;
CREATE TABLE IF NOT EXISTS billing.invoice (
    id         bigserial PRIMARY KEY,
    status     text NOT NULL,
    last_error text
);
CREATE INDEX IF NOT EXISTS invoice_status_id_idx ON billing.invoice (status, id);
CREATE TABLE IF NOT EXISTS billing.invoice_claim (
    instance_id bigint      PRIMARY KEY REFERENCES billing.invoice (id),
    node        text        NOT NULL,
    token       text        NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS invoice_claim_expires_idx ON billing.invoice_claim (expires_at);
CREATE TABLE IF NOT EXISTS reports (
    id    bigserial PRIMARY KEY,
    state text NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_state_id_idx ON reports (state, id);
