package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// watcher polls the index and the table until they agree.
type watcher struct {
	es     *search
	src    source
	index  string
	exited <-chan error // the mirror's exit
}

// poll calls check every half second until it reports done, ctx ends or the mirror exits.
func (w *watcher) poll(ctx context.Context, what string, check func() (bool, error)) error {
	for {
		done, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: the index did not converge in time", what)
		case err := <-w.exited:
			return fmt.Errorf("%s: cdcmirror exited (%v)", what, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitCount waits until the index holds as many documents as the table has rows. It prints
// only the result: meanwhile cdcmirror may be drawing its progress bar on the same terminal.
func (w *watcher) waitCount(ctx context.Context, what string) error {
	var docs, rows int64
	err := w.poll(ctx, what, func() (bool, error) {
		var err error
		if docs, err = w.es.count(ctx, w.index); err != nil {
			return false, err
		}
		rows, err = w.src.count(ctx)
		return docs == rows, err
	})
	if err != nil {
		return fmt.Errorf("%w (last seen: %d documents, %d rows)", err, docs, rows)
	}
	fmt.Printf("%s%s: index %s holds %d documents, the table %d rows\n", wipe, what, w.index, docs, rows)
	return nil
}

// wipe clears the current terminal line first, in case cdcmirror's bar is still on it.
var wipe = func() string {
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return "\r\x1b[K"
	}
	return ""
}()

// waitDocs waits until the documents of ids equal their rows (absent where the row is gone),
// then prints them.
func (w *watcher) waitDocs(ctx context.Context, ids []int64) error {
	var docs map[int64]map[string]any
	err := w.poll(ctx, "documents", func() (bool, error) {
		rows, err := w.src.rows(ctx, ids)
		if err != nil {
			return false, err
		}
		if docs, err = w.es.docs(ctx, w.index, ids); err != nil {
			return false, err
		}
		for _, id := range ids {
			if r, ok := rows[id]; !matches(r, ok, docs[id]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(slices.Values(ids)) {
		if d, ok := docs[id]; ok {
			b, _ := json.Marshal(d)
			fmt.Printf("  doc %d: %s\n", id, b)
		} else {
			fmt.Printf("  doc %d: absent (row deleted)\n", id)
		}
	}
	return nil
}

// matches compares a row with its document: the document is absent exactly when the row is,
// and customer, qty, price (by exact value) and note agree.
func matches(r row, present bool, doc map[string]any) bool {
	if !present || doc == nil {
		return !present && doc == nil
	}
	price, ok := new(big.Rat).SetString(fmt.Sprint(doc["price"]))
	if !ok || r.price == nil || price.Cmp(r.price) != 0 {
		return false
	}
	note, isText := doc["note"].(string)
	switch {
	case r.note == nil && doc["note"] != nil, r.note != nil && (!isText || note != *r.note):
		return false
	}
	return doc["customer"] == r.customer && fmt.Sprint(doc["qty"]) == fmt.Sprint(r.qty)
}

// showMetrics prints the mirror's own metrics, the series a dashboard would chart.
func showMetrics(ctx context.Context, addr string) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println("metrics:", err)
		return
	}
	defer res.Body.Close()
	fmt.Printf("metrics (http://%s/metrics, excerpt):\n", addr)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"cdcmirror_events_total", "cdcmirror_batches_total", "cdcmirror_replication_lag_seconds",
			"cdcmirror_bulk_requests_total", "cdcmirror_bulk_items_total", "cdcmirror_claims_total", "cdcmirror_dead_letters_total",
			"cdcmirror_backpressure_retries_total", "cdcmirror_healthy"} {
			if strings.HasPrefix(line, p+"{") || strings.HasPrefix(line, p+" ") {
				fmt.Println("  " + line)
			}
		}
	}
}
