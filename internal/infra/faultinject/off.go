//go:build !faultinject

package faultinject

// Off reports whether m is turned off: never, in this build.
func Off(Mechanism) bool { return false }
