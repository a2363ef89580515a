package pgdb

import "net"

// SetResolver makes the pools opened from now on look host names up with
// r, until the returned function puts the default back.
func SetResolver(r *net.Resolver) (restore func()) {
	old := resolver
	resolver = r
	return func() { resolver = old }
}
