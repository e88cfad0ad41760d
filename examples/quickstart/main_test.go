package main

import (
	"context"
	"os"
)

// The quickstart's output is its test: every line is what the store must answer.
func Example() {
	if err := run(context.Background(), os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// put:              created
	// read:             found {"name":"Ada","visits":1}
	// batch[0]:         updated {"name":"Ada","visits":42}
	// batch[1]:         conflict (stale revision)
	// batch[2]:         found {"name":"Ada","visits":42}
	// delete, read:     deleted, absent
}
