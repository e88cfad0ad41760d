package cdc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// trace records the order of the calls the preflight tests care about.
type trace struct {
	mu    sync.Mutex
	calls []string
}

func (tr *trace) add(s string) {
	tr.mu.Lock()
	tr.calls = append(tr.calls, s)
	tr.mu.Unlock()
}

func (tr *trace) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string{}, tr.calls...)
}

// listingStream is a fake stream that lists its tables and records when Events is asked for.
type listingStream struct {
	*fakeStream
	tables []*cdc.TableSchema
	tr     *trace
}

func (s *listingStream) Tables() []*cdc.TableSchema { s.tr.add("tables"); return s.tables }
func (s *listingStream) Events() <-chan cdc.Event   { s.tr.add("events"); return s.fakeStream.Events() }

// checkingSink is a fake sink that checks tables.
type checkingSink struct {
	*fakeSink
	tr    *trace
	check func([]*cdc.TableSchema) error
	got   [][]*cdc.TableSchema
}

func (s *checkingSink) CheckTables(ctx context.Context, tables []*cdc.TableSchema) error {
	s.tr.add("check")
	s.got = append(s.got, tables)
	return s.check(tables)
}

// preflightHarness is a harness whose stream lists tables and whose sink checks them.
func preflightHarness(t *testing.T, check func([]*cdc.TableSchema) error, opts cdc.RunnerOptions) (*harness, *checkingSink, *trace) {
	h := newHarness(t, opts)
	tr := &trace{}
	h.src.wrap = func(st *fakeStream) cdc.Stream {
		tr.add("open")
		return &listingStream{fakeStream: st, tables: []*cdc.TableSchema{schema}, tr: tr}
	}
	cs := &checkingSink{fakeSink: h.sink, tr: tr, check: check}
	if opts.BatchMaxWait == 0 {
		opts.BatchMaxWait = time.Hour
	}
	r, err := cdc.NewRunner("pipe", h.src, cs, h.store, h.dlq, &opts)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h, cs, tr
}

// TestRunnerPreflightRefusal: a sink that refuses the stream's tables stops Run before it
// reads any event, with the refusal reachable through errors.As and errors.Is, no batch
// written and the stored checkpoint unchanged.
func TestRunnerPreflightRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusal := &cdc.StartError{Component: "test sink", Problems: []cdc.StartProblem{
			{Table: table, Problem: "has no primary key", Fix: "add one"}}}
		h, cs, tr := preflightHarness(t, func([]*cdc.TableSchema) error { return refusal }, cdc.RunnerOptions{BatchMaxEvents: 1})
		if err := h.store.SaveCheckpoint(context.Background(), "pipe", cdc.Checkpoint("7")); err != nil {
			t.Fatal(err)
		}
		st := h.run(t.Context())
		err := h.wait()
		var se *cdc.StartError
		if !errors.As(err, &se) || se != refusal || !errors.Is(err, cdc.ErrStart) {
			t.Fatalf("Run: %v, want the sink's *cdc.StartError", err)
		}
		if !strings.Contains(err.Error(), "has no primary key (fix: add one)") {
			t.Fatalf("error %q does not name the problem and its fix", err)
		}
		if got, want := tr.list(), []string{"open", "tables", "check"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("calls %v, want %v: no event may be read after a refusal", got, want)
		}
		if len(cs.got) != 1 || len(cs.got[0]) != 1 || cs.got[0][0] != schema {
			t.Fatalf("the sink checked %v, want the stream's tables", cs.got)
		}
		if st.send(txEvents(1, 1)...) {
			t.Fatal("the stream is still read after the refusal")
		}
		if n := len(h.sink.calls()); n != 0 {
			t.Fatalf("%d batches written after a refusal", n)
		}
		if cp := h.checkpoint(); cp != "7" {
			t.Fatalf("checkpoint %q, want it unchanged at 7", cp)
		}
		if hl := h.r.Health(); hl.Healthy || !strings.Contains(hl.Reason, "has no primary key") {
			t.Fatalf("health %+v, want stopped by the refusal", hl)
		}
	})
}

// TestRunnerPreflightPasses: an accepted check comes after Open and before the first event
// is read, once per Run; the pipeline then runs as usual.
func TestRunnerPreflightPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, cs, tr := preflightHarness(t, func([]*cdc.TableSchema) error { return nil }, cdc.RunnerOptions{BatchMaxEvents: 1})
		st := h.run(t.Context())
		st.send(txEvents(1, 1)...)
		st.end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if got, want := tr.list(), []string{"open", "tables", "check", "events"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
		if len(cs.got) != 1 || h.checkpoint() != "1" {
			t.Fatalf("checks %d, checkpoint %q", len(cs.got), h.checkpoint())
		}
	})
}

// TestRunnerPreflightNeedsBoth: without a listing stream the checker is never called, and a
// listing stream with a sink that checks nothing runs as usual.
func TestRunnerPreflightNeedsBoth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, cs, tr := preflightHarness(t, func([]*cdc.TableSchema) error { return errors.New("must not be called") }, cdc.RunnerOptions{BatchMaxEvents: 1})
		h.src.wrap = nil
		st := h.run(t.Context())
		st.send(txEvents(1, 1)...)
		st.end(nil)
		if err := h.wait(); err != nil || len(cs.got) != 0 || len(tr.list()) != 0 {
			t.Fatalf("Run %v, checks %d, calls %v", err, len(cs.got), tr.list())
		}

		h2 := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 1})
		tr2 := &trace{}
		h2.src.wrap = func(st *fakeStream) cdc.Stream { return &listingStream{fakeStream: st, tr: tr2} }
		st2 := h2.run(t.Context())
		st2.send(txEvents(1, 1)...)
		st2.end(nil)
		if err := h2.wait(); err != nil || len(h2.sink.calls()) != 1 {
			t.Fatalf("Run %v, batches %d", err, len(h2.sink.calls()))
		}
		if got := tr2.list(); !reflect.DeepEqual(got, []string{"events"}) {
			t.Fatalf("calls %v: the tables are listed only for a sink that checks them", got)
		}
	})
}

// logLines parses slog text output into one map of attributes per line.
func logLines(buf *bytes.Buffer, mu *sync.Mutex) []map[string]string {
	mu.Lock()
	defer mu.Unlock()
	var out []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		out = append(out, parseLogLine(line))
	}
	return out
}

// parseLogLine reads key=value and key="quoted value" pairs of a slog text line.
func parseLogLine(line string) map[string]string {
	m := map[string]string{}
	for line != "" {
		eq := strings.IndexByte(line, '=')
		if eq < 0 {
			break
		}
		key := strings.TrimSpace(line[:eq])
		rest := line[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			val = strings.ReplaceAll(strings.ReplaceAll(rest[1:min(end, len(rest))], `\"`, `"`), `\\`, `\`)
			rest = rest[min(end+1, len(rest)):]
		} else {
			sp := strings.IndexByte(rest, ' ')
			if sp < 0 {
				sp = len(rest)
			}
			val, rest = rest[:sp], rest[sp:]
		}
		m[key] = val
		line = strings.TrimLeft(rest, " ")
	}
	return m
}

// lockedWriter serializes writes of the runner's logger with the test's reads.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestRunnerReportsDeadLettersRateLimited: dead letters and truncates are logged at Warn
// with table, op, position and reason -- the first of each (table, reason class) at once,
// later ones as one summary line per interval with their count, the rest when Run returns
// -- and no line carries row data.
func TestRunnerReportsDeadLettersRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		h := newHarness(t, cdc.RunnerOptions{BatchMaxEvents: 3, Logger: log, ReportInterval: time.Minute})
		const secret = "row-secret-value"
		h.sink.respond = func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error) {
			var dead []cdc.DeadLetter
			for i, ev := range batch {
				switch {
				case ev.Op == cdc.Truncate:
				case ev.Table.Table == "other":
					dead = append(dead, cdc.DeadLetter{Index: i, Reason: "rejected by the cluster: status 400 mapper_parsing_exception"})
				default:
					dead = append(dead, cdc.DeadLetter{Index: i, Reason: `serialization failure: column "name": not valid UTF-8`})
				}
			}
			return dead, nil
		}
		secretTx := func(tx int) []cdc.Event {
			evs := txEvents(tx, 3)
			for i := range evs {
				evs[i].After[1] = secret
			}
			return evs
		}
		warns := func() []map[string]string { return logLines(&buf, &mu) }
		ctx, cancel := context.WithCancel(t.Context())
		st := h.run(ctx)

		st.send(secretTx(1)...) // 3 dead letters: the first logged, 2 counted
		synctest.Wait()
		lines := warns()
		if len(lines) != 1 || lines[0]["msg"] != "event dead-lettered" || lines[0]["table"] != table.String() ||
			lines[0]["op"] != "insert" || lines[0]["position"] != "1/0" || lines[0]["reason"] != `serialization failure: column "name": not valid UTF-8` ||
			lines[0]["level"] != "WARN" {
			t.Fatalf("after the first batch: %v", lines)
		}

		time.Sleep(30 * time.Second)
		st.send(secretTx(2)...) // within the interval: counted only (5)
		synctest.Wait()
		if n := len(warns()); n != 1 {
			t.Fatalf("%d lines within the interval, want still 1: %v", n, warns())
		}

		// Another table and another reason class are limited on their own; a truncate the
		// sink applied is reported too.
		other := txEvents(3, 1)[0]
		other.Table.Table = "other"
		trunc := cdc.Event{Op: cdc.Truncate, Table: table, Schema: schema, Position: pos{4, 0}, Checkpoint: cdc.Checkpoint("4")}
		malformed := txEvents(5, 1)[0]
		malformed.Malformed = errors.New(`column "name": bad text`)
		st.send(other, trunc, malformed)
		synctest.Wait()
		lines = warns()
		if len(lines) != 4 {
			t.Fatalf("lines %v, want 4", lines)
		}
		if l := lines[1]; l["table"] != "fake:src/db.other" || l["reason"] != "rejected by the cluster: status 400 mapper_parsing_exception" || l["position"] != "3/0" {
			t.Fatalf("other table's line: %v", l)
		}
		if l := lines[2]; l["reason"] != `malformed: column "name": bad text` || l["position"] != "5/0" {
			t.Fatalf("malformed line: %v", l)
		}
		if l := lines[3]; !strings.HasPrefix(l["msg"], "table truncated at the source") || l["position"] != "4/0" || l["table"] != table.String() {
			t.Fatalf("truncate line: %v", l)
		}

		time.Sleep(31 * time.Second) // the first key's interval has passed: the next batch reports
		st.send(secretTx(6)...)      // 8 counted since the first line
		synctest.Wait()
		lines = warns()
		if len(lines) != 5 {
			t.Fatalf("lines %v, want a summary after the interval", lines)
		}
		if l := lines[4]; l["msg"] != "events dead-lettered since the last report" || l["count"] != "8" ||
			l["reason_class"] != "serialization failure" || l["last_position"] != "6/2" || l["table"] != table.String() {
			t.Fatalf("summary: %v", l)
		}

		st.send(secretTx(7)...) // right after a summary: counted again, reported when Run returns
		synctest.Wait()
		if n := len(warns()); n != 5 {
			t.Fatalf("%d lines, want 5 right after a summary", n)
		}
		cancel()
		if err := h.wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
		lines = warns()
		if len(lines) != 6 || lines[5]["count"] != "3" || lines[5]["last_position"] != "7/2" {
			t.Fatalf("lines at the end %v, want the last 3 summarized", lines)
		}
		mu.Lock()
		all := buf.String()
		mu.Unlock()
		if strings.Contains(all, secret) {
			t.Fatalf("a log line carries row data:\n%s", all)
		}
		if n := len(h.dlq.list()); n != 3+3+1+1+3+3 {
			t.Fatalf("%d dead letters in the queue, want every one despite the rate limit", n)
		}
	})
}

// TestRunnerPreflightOncePerRun: a reopening after a failure does not check the tables again
// (a table that appeared meanwhile is the sink's to handle on its first write, never a stop),
// and a Run whose first Open failed checks after the first Open that succeeds.
func TestRunnerPreflightOncePerRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, tr := preflightHarness(t, func([]*cdc.TableSchema) error { return nil }, cdc.RunnerOptions{BatchMaxEvents: 1})
		h.src.mu.Lock()
		h.src.openErr = errors.New("connection refused")
		h.src.mu.Unlock()
		h.done = make(chan error, 1)
		go func() { h.done <- h.r.Run(t.Context()) }()
		time.Sleep(3 * time.Second)
		h.src.mu.Lock()
		h.src.openErr = nil
		h.src.mu.Unlock()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		h.src.stream(0).end(errors.New("connection reset"))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		h.src.stream(1).end(nil)
		if err := h.wait(); err != nil {
			t.Fatal(err)
		}
		if got, want := tr.list(), []string{"open", "tables", "check", "events", "open", "events"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
	})
}
