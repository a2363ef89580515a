// Package archtest holds the tests of the rules of enginehealth's
// layout (see ARCHITECTURE.md): the import rules between its packages,
// the fence rule, json tags only on the API's wire types (apitype), and
// no build output tracked by git. It has no code of its own.
package archtest
