package main

import "context"

// The quickstart's output is its test: every line is what the store must answer.
func Example() {
	if err := run(context.Background()); err != nil {
		panic(err)
	}
	// Output:
	// put:              created
	// conditional put:  updated
	// stale put:        conflict=true
	// merge:            updated {"name":"Ada Lovelace","visits":42}
	// read:             found {"name":"Ada Lovelace","visits":42}
	// delete, read:     deleted, not found
}
