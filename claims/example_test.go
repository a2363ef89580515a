package claims

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"
)

// Example is an engine worker on the claim protocol (docs/claim-protocol.md):
// it takes the oldest invoice waiting for the task "send" (entering
// Sending under a claim, in one transaction), renews the claim while the
// work lasts, and finishes the task (Sent, deleting the claim, in one
// transaction). A worker that crashes leaves its claim behind; once it
// expires, the enginehealth master repairs the invoice.
func Example() {
	db, done := exampleDB() // the tables of docs/claim-protocol.md; invoice 1 is Created
	defer done()            // (panics below, not log.Fatal: they run it, which drops the database)
	ctx := context.Background()

	invoices := Table{
		Instances: "app.invoice", IDColumn: "id", StatusColumn: "status",
		Claims: "app.invoice_claim", InstanceColumn: "instance_id", NodeColumn: "node",
		TokenColumn: "token", ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at",
	}
	send := Task{Name: "send", Begin: "Created", Interim: "Sending", Ends: []string{"Sent"}, Failed: "SendFailed", Timeout: time.Minute}

	c, err := invoices.ClaimNext(ctx, db, "node-a", send)
	if errors.Is(err, ErrNothingToClaim) {
		return // nothing waits: poll again later
	}
	if err != nil {
		panic(err)
	}
	fmt.Printf("node-a claimed invoice %s for %s\n", c.Instance, c.Task.Name)

	// … the work; a long one renews its claim every third of the timeout:
	if err := invoices.Renew(ctx, db, &c); err != nil {
		panic(err) // the claim expired: the master may have repaired the invoice, stop
	}

	if err := invoices.Finish(ctx, db, c, "Sent"); err != nil {
		panic(err)
	}
	var status string
	if err := db.QueryRowContext(ctx, `SELECT status FROM app.invoice WHERE id = $1`, c.Instance).Scan(&status); err != nil {
		panic(err)
	}
	fmt.Printf("invoice %s is %s\n", c.Instance, status)
	// Output:
	// node-a claimed invoice 1 for send
	// invoice 1 is Sent
}

// exampleDB returns a database of the test server with the protocol's
// tables and one Created invoice, and the function that drops it.
func exampleDB() (*sql.DB, func()) {
	url, drop, err := pg.CreateDatabase(fmt.Sprintf("claims_example_%d", time.Now().UnixNano()))
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("postgres", url)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec(DDL + `INSERT INTO app.invoice (status) VALUES ('Created');`); err != nil {
		log.Fatal(err)
	}
	return db, func() {
		db.Close()
		if err := drop(); err != nil {
			log.Print(err)
		}
	}
}
