package configs

import (
	"errors"
	"runtime"
	"testing"
)

// FuzzParse: whatever the file holds, Parse never panics, every problem it
// reports has a key path and a short message, and it allocates little.
// The seed corpus (testdata/fuzz/FuzzParse) holds the hostile inputs of
// TestHostileConfigs and TestParseMemoryIsBounded; `make test` fuzzes for
// a short while on top.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + workflow))
	f.Add([]byte(minimal + "health: {schedule: \"@every 1m\", sweep_interval: 30s}\n"))
	f.Add([]byte(minimal + "health: {schedule: \"*/5 * * * *\", sweep_interval: 5m}\n"))
	f.Add([]byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"a:1\", \"http://u:p@b:1\"], tls: {ca_file: ca.pem, cert_file: c.pem, server_name: e}, username: u, password_env: P}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxConfigBytes {
			return // Load refuses such files before parsing
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cfg, err := Parse(data, "fuzz.yaml", testEnv)
		runtime.ReadMemStats(&after)
		if used := after.TotalAlloc - before.TotalAlloc; used > 64<<20 {
			t.Fatalf("allocated %d MB for %d bytes", used>>20, len(data))
		}
		if err == nil {
			if cfg == nil {
				t.Fatal("no config and no error")
			}
			return
		}
		var cerr *Error
		if !errors.As(err, &cerr) {
			t.Fatalf("error %T, want *Error: %v", err, err)
		}
		if len(cerr.Problems) == 0 {
			t.Fatal("an *Error without problems")
		}
		for _, p := range cerr.Problems {
			if p.Path == "" {
				t.Fatalf("problem without a key path: %+v", p)
			}
			if len(p.Msg) > 1000 || len(p.Path) > 500 {
				t.Fatalf("problem of %d bytes (path %d): a value is echoed whole", len(p.Msg), len(p.Path))
			}
		}
	})
}
