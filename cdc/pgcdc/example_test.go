package pgcdc_test

import (
	"context"
	"log"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
)

// A pipeline's read loop over a PostgreSQL source: open from the stored checkpoint, hand
// events on, and acknowledge a checkpoint only once it is stored. (Compile-only: it needs a
// server.)
func Example() {
	ctx := context.Background()
	src, err := pgcdc.New("postgres://cdc@127.0.0.1:5432/shop", &pgcdc.Options{
		Name:   "shop",
		Tables: []pgcdc.Table{{Schema: "public", Name: "Orders"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	var stored cdc.Checkpoint // loaded from the checkpoint store; nil the first time
	st, err := src.Open(ctx, stored)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	for ev := range st.Events() {
		// ... write ev to the sink ...
		if ev.Checkpoint != nil {
			// ... store ev.Checkpoint durably, then:
			if err := st.Ack(ctx, ev.Checkpoint); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := st.Err(); err != nil {
		log.Print(err) // reconnecting is the caller's: Open again from the stored checkpoint
	}
}
