// Package archtest holds the test of the import rules between the
// packages of enginehealth (see ARCHITECTURE.md). It has no code of its
// own.
package archtest
