//go:build faultinject

package faultinject

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

var off = map[Mechanism]bool{}

func init() {
	v := os.Getenv("EH_UNSAFE")
	if v == "" {
		return
	}
	for _, m := range strings.Split(v, ",") {
		if !slices.Contains(Mechanisms, Mechanism(m)) {
			fmt.Fprintf(os.Stderr, "faultinject: EH_UNSAFE names %q: want some of %v\n", m, Mechanisms)
			os.Exit(2)
		}
		off[Mechanism(m)] = true
	}
	fmt.Fprintf(os.Stderr, "faultinject: UNSAFE BUILD, safety mechanisms turned off: %s\n", v)
}

// Off reports whether m is turned off (EH_UNSAFE names it).
func Off(m Mechanism) bool { return off[m] }
