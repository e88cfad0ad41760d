// Package doccheck holds the tests that keep the repository's Markdown true to the tree: every
// relative link of the README, docs/, DESIGN.md, the CHANGELOG and the configuration references
// names a file that exists (and, with #anchor, a heading of it); every docs/production.md#anchor
// named outside the Markdown (alert rules' runbook links, dashboards, units) is a heading of the
// guide; and every cdcmirror configuration shown in docs/production.md (a ```yaml block whose
// first line is "# cdcmirror...") is accepted by cdcmirror's own parser, mirror.ParseConfig; every
// cdcmirror_/recordsvc_ metric name it shows in code is one the collectors define; every
// `go run` / `go build` shown in Markdown, YAML comments and Go doc comments finds its package
// from the directory the text runs it in, and the files it names exist (commands_test.go); every
// `make TARGET` shown is a target of the Makefile. It has no code of its own.
package doccheck
