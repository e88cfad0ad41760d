//go:build race

package sink

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation counts of
// pooled paths are not exact under -race.
const raceEnabled = true
