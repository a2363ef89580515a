// Package docs holds the test of the documentation: every relative link
// and anchor in README.md, ARCHITECTURE.md and docs/*.md resolves, and
// README.md stays short. It has no code of its own.
package docs
