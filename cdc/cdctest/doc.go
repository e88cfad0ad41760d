// Package cdctest is the conformance suite for change-data-capture sources: every source proves
// the same ordering, versioning, checkpoint and schema behaviour against its real database.
//
// A source's test supplies a Harness and calls Run inside a subtest named by the source
// (`postgres`, `mysql`), so `go test -v` shows TestConformance/<source>/<Behaviour>.
package cdctest
