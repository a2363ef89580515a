// Command demo-engine is a small real workflow engine on the claims API,
// for the demo, the tests and the benchmarks. It reads the workflows and the
// database DSN from an enginehealth configuration file.
//
//	demo-engine seed --config FILE --instances N
//	demo-engine run  --config FILE --node NAME [--workers 4] [--task-duration 200ms] [--failure-rate 0.05] [--poison ID,...]
//
// run prints one JSON line of counters per second and at exit; SIGTERM
// finishes the tasks in hand, SIGKILL leaves their claims behind (which is
// what enginehealth is for).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/demoengine"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo-engine seed|run --config FILE ...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	var err error
	switch os.Args[1] {
	case "seed":
		err = seed(ctx, os.Args[2:])
	case "run":
		err = run(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want seed or run", os.Args[1])
	}
	stop() // not deferred: os.Exit would skip it
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-engine:", err)
		os.Exit(1)
	}
}

// open loads the configuration and opens its database as app (the
// application_name its connections show in pg_stat_activity), unless the
// DSN names one (the fault suite's checker names each engine so).
func open(path, app string) (*configs.Config, *sql.DB, error) {
	cfg, err := configs.Load(path)
	if err != nil {
		return nil, nil, err
	}
	pcfg, err := pq.NewConfig(cfg.Database.DSN)
	if err != nil {
		return nil, nil, errors.New("database DSN is malformed")
	}
	if pcfg.ApplicationName == "" {
		pcfg.ApplicationName = app
	}
	connector, err := pq.NewConnectorConfig(pcfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, sql.OpenDB(connector), nil
}

func seed(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	path := fs.String("config", "", "enginehealth configuration file")
	n := fs.Int("instances", 1000, "orders and reports to create")
	_ = fs.Parse(args)
	_, db, err := open(*path, "engine/seed")
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	return demoengine.Seed(ctx, db, *n)
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	path := fs.String("config", "", "enginehealth configuration file")
	node := fs.String("node", "", "node name recorded in claims")
	workers := fs.Int("workers", 4, "concurrent workers per claimable workflow")
	dur := fs.Duration("task-duration", 200*time.Millisecond, "simulated duration of one task")
	failRate := fs.Float64("failure-rate", 0.05, "fraction of tasks that fail")
	poison := fs.String("poison", "", "comma-separated instance ids that crash the worker claiming them, every time")
	_ = fs.Parse(args)
	if *node == "" {
		return errors.New("--node is required")
	}
	cfg, db, err := open(*path, "engine/"+*node)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	db.SetMaxOpenConns(2 * *workers * len(cfg.Workflows))

	var poisoned []string
	if *poison != "" {
		poisoned = strings.Split(*poison, ",")
	}
	enc := json.NewEncoder(os.Stdout)
	var encMu sync.Mutex
	crashed := func(id string) {
		encMu.Lock()
		defer encMu.Unlock()
		_ = enc.Encode(map[string]any{"node": *node, "crashed_on": id})
	}
	var ws []*demoengine.Worker
	for _, wf := range cfg.Workflows {
		table, ok := wf.ClaimsTable()
		if !ok {
			continue
		}
		for range *workers {
			w, err := demoengine.New(demoengine.Config{DB: db, Node: *node, Table: table, Tasks: wf.ClaimTasks(), TaskDuration: *dur,
				FailureRate: *failRate, Poison: poisoned, OnCrash: crashed})
			if err != nil {
				return err
			}
			ws = append(ws, w)
		}
	}
	report := func(final bool) {
		encMu.Lock()
		defer encMu.Unlock()
		var c, f, fl, l int64
		for _, w := range ws {
			c += w.Stats.Claimed.Load()
			f += w.Stats.Finished.Load()
			fl += w.Stats.Failed.Load()
			l += w.Stats.Lost.Load()
		}
		_ = enc.Encode(map[string]any{"node": *node, "claimed": c, "finished": f, "failed": fl, "lost": l, "final": final})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ws))
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx, nil); err != nil {
				errs <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			report(true)
			select {
			case err := <-errs:
				return err
			default:
				return nil
			}
		case <-tick.C:
			report(false)
		}
	}
}
