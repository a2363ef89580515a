package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// TestNewerSchemaRefused: on a database a newer release migrated (a
// migration this binary does not know is recorded), the daemon says why
// and exits 2 (which the unit does not restart) before it registers or
// writes anything; migrate says the same and exits non-zero. The
// releases before this one retried the refused migration for good.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cfg := c.config("node-a", "")
	path := filepath.Join(c.dir, "migrate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ENGINEHEALTH_DSN=" + c.dsn}
	if out, errOut, code := cli(t, env, "migrate", "--config", path); code != 0 {
		t.Fatalf("migrate: exit %d: %s%s", code, out, errOut)
	}
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].Version
	c.db.MustExec(`INSERT INTO enginehealth.schema_migrations (version, name) VALUES ($1, $2)`,
		newest+1, fmt.Sprintf("%04d_of_a_newer_release.sql", newest+1))
	want := fmt.Sprintf("the database is at schema version %d but this binary knows only up to %d: upgrade enginehealth", newest+1, newest)

	d := c.start("node-a", cfg)
	if code := d.wait(t, 60*time.Second); code != 2 || !strings.Contains(d.stderr.String(), want) {
		t.Fatalf("run on a newer schema: exit %d, want 2 saying %q:\n%s", code, want, d.stderr.String())
	}
	if strings.Contains(d.stderr.String(), "migrate failed, retrying") {
		t.Fatalf("the refused migration was retried:\n%s", d.stderr.String())
	}
	if _, err := c.node("node-a"); err == nil {
		t.Fatal("the refused daemon registered")
	}
	var events int
	if err := c.db.Get(&events, `SELECT count(*) FROM enginehealth.events`); err != nil || events != 0 {
		t.Fatalf("the refused daemon wrote %d events (%v)", events, err)
	}
	_, errOut, code := cli(t, env, "migrate", "--config", path)
	if code == 0 || !strings.Contains(errOut, want) {
		t.Fatalf("migrate on a newer schema: exit %d, want non-zero saying %q: %s", code, want, errOut)
	}
}
