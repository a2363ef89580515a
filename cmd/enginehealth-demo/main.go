// Command enginehealth-demo tells enginehealth's story on embedded
// defaults (make demo): a temporary PostgreSQL cluster, an in-process etcd,
// three enginehealth nodes and three demo engines; one engine node is
// killed, then the master; the timeline is printed. It is kept apart from
// the production binary, which never links etcd's server.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/enginehealth/enginehealth/internal/app/demo"
)

func main() {
	self, _ := os.Executable()
	bin := flag.String("bin", filepath.Dir(self), "directory holding the enginehealth and demo-engine binaries")
	keep := flag.Bool("keep", false, "keep the surviving node running until Ctrl-C")
	instances := flag.Int("instances", 3000, "instances of each demo workflow")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	_, err := demo.Run(ctx, demo.Options{BinDir: *bin, Out: os.Stdout, Keep: *keep, Instances: *instances})
	interrupted := ctx.Err() != nil
	stop() // not deferred: os.Exit would skip it
	switch {
	case err == nil:
		fmt.Println("\ndemo finished; every process, temporary directory and port is released")
	case interrupted && *keep:
		fmt.Println("\nstopped; every process, temporary directory and port is released")
	default:
		fmt.Fprintln(os.Stderr, "enginehealth-demo:", err)
		os.Exit(1)
	}
}
