package cdc_test

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// sliceSource replays fixed events after a checkpoint (a transaction number).
type sliceSource struct{ events []cdc.Event }

func (s sliceSource) Open(ctx context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	st := &countingStream{ch: make(chan cdc.Event, len(s.events)), done: make(chan struct{})}
	for _, ev := range s.events {
		if cp == nil || ev.TxID > string(cp) {
			st.ch <- ev
		}
	}
	close(st.ch)
	return st, nil
}

type printSink struct{}

func (printSink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	fmt.Printf("batch of %d, from %v\n", len(batch), batch[0].Position)
	return nil, nil
}

type printDLQ struct{}

func (printDLQ) WriteDeadLetters(ctx context.Context, recs []cdc.DeadLetterRecord) error {
	for _, r := range recs {
		fmt.Printf("dead letter at %v: %s\n", r.Event.Position, r.Reason)
	}
	return nil
}

func ExampleRunner() {
	ctx := context.Background()
	state := statestore.NewMemory() // statestore.Open(path, nil) in production
	bad := txEvents(3, 1)
	bad[0].Malformed = fmt.Errorf("column 2 undecodable")
	src := sliceSource{concat(txEvents(1, 2), txEvents(2, 3), bad)}

	r, err := cdc.NewRunner("orders-to-es", src, printSink{}, state, printDLQ{}, &cdc.RunnerOptions{BatchMaxEvents: 4})
	if err != nil {
		panic(err)
	}
	if err := r.Run(ctx); err != nil { // returns when the source's stream ends
		panic(err)
	}
	cp, _ := state.LoadCheckpoint(ctx, "orders-to-es")
	fmt.Printf("checkpoint %s, %+v\n", cp, r.Progress().Batches)

	// A second run resumes after the checkpoint: nothing left to do.
	_ = r.Run(ctx)
	fmt.Println(r.Progress().Events, "events in total")
	// Output:
	// batch of 4, from 1/0
	// batch of 1, from 2/2
	// dead letter at 3/0: malformed: column 2 undecodable
	// checkpoint 3, 2
	// 6 events in total
}
