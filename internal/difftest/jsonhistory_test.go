package difftest

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// historySink is the case's sink, recording for every update whose JSON column the source did
// not resend (cdc.Unchanged: a TOASTed value) the value the row held then -- the latest one an
// earlier event of the row carried, under its old _id for a key change. That is the value the
// sink fills in from an older change of the batch (sink/unchanged.go), so a dead letter of
// such an update can be classified by it (classifyDeadLetter): a filled-in top-level scalar is
// refused by flattened as the original insert was. The embedded *sink.Sink keeps every other
// method (ConcurrentWrites, IdentityColumns, CheckTables), so the runner drives it unchanged.
type historySink struct {
	*sink.Sink

	mu       sync.Mutex
	last     map[string]map[int][]byte // table and _id (rowKey) -> JSON column -> the last value seen (nil: NULL)
	resolved map[string]map[int][]byte // eventKey -> JSON column -> the value Unchanged stood for
	// schemas: the schema cases' trace of what the source said about each table -- every
	// truncate and every change of the description a table's events carry (relation, columns,
	// key), in the order written -- logged by a failing case (schemaTrace).
	schemas   []string
	lastShape map[string]string // table -> its events' last description
	relTable  map[string]string // relation -> the table its last event named
}

func newHistorySink(k *sink.Sink) *historySink {
	return &historySink{Sink: k, last: map[string]map[int][]byte{}, resolved: map[string]map[int][]byte{}}
}

func eventKey(id string, ev cdc.Event) string {
	pos := ""
	if ev.Position != nil {
		pos = ev.Position.String()
	}
	return rowKey(ev, id) + "\x00" + pos
}

// rowKey is a row's key across the tables of a case: its table and _id.
func rowKey(ev cdc.Event, id string) string {
	return ev.Table.Database + "\x00" + ev.Table.Schema + "\x00" + ev.Table.Table + "\x00" + id
}

// Write implements cdc.Sink: it records the batch (the runner offers a batch again only after
// backpressure, which records the same values again) and writes it.
func (h *historySink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	h.record(batch)
	return h.Sink.Write(ctx, batch)
}

func (h *historySink) record(batch []cdc.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range batch {
		h.traceSchema(ev)
		if ev.Op == cdc.Truncate {
			// The table's documents are gone (a truncate is mirrored: sink/doc.go).
			pfx := rowKey(ev, "")
			for k := range h.last {
				if strings.HasPrefix(k, pfx) {
					delete(h.last, k)
				}
			}
			continue
		}
		if ev.Schema == nil || ev.Malformed != nil {
			continue
		}
		id, ok := eventID(ev)
		if !ok {
			continue
		}
		if ev.Op == cdc.Delete {
			delete(h.last, rowKey(ev, id))
			continue
		}
		prev := h.last[rowKey(ev, unchangedSourceID(ev, id))]
		cur := map[int][]byte{}
		var resolved map[int][]byte
		for i, c := range ev.Schema.Columns {
			if c.Kind != cdc.KindJSON || i >= len(ev.After) {
				continue
			}
			if _, un := ev.After[i].(cdc.Unchanged); un {
				if resolved == nil {
					resolved = map[int][]byte{}
					h.resolved[eventKey(id, ev)] = resolved
				}
				resolved[i], cur[i] = prev[i], prev[i]
				continue
			}
			cur[i] = jsonBytes(ev.After[i])
		}
		h.last[rowKey(ev, id)] = cur
	}
}

// unchangedJSON returns the value an Unchanged JSON column i of ev stood for, nil when unknown.
func (h *historySink) unchangedJSON(ev cdc.Event, i int) []byte {
	if h == nil {
		return nil
	}
	id, ok := eventID(ev)
	if !ok {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resolved[eventKey(id, ev)][i]
}

// traceSchema records ev in the schema trace when it is a truncate, its description differs
// from the table's last one, or its relation's last event named another table.
func (h *historySink) traceSchema(ev cdc.Event) {
	tbl := ev.Table.Schema + "." + ev.Table.Table
	if ev.Table.Schema == "" {
		tbl = ev.Table.Database + "." + ev.Table.Table
	}
	shape := eventSchemaNote(cdc.Event{Schema: ev.Schema})
	rel := ""
	if ev.Schema != nil {
		rel = ev.Schema.Relation
	}
	if h.lastShape == nil {
		h.lastShape, h.relTable = map[string]string{}, map[string]string{}
	}
	moved := rel != "" && h.relTable[rel] != tbl
	if ev.Op != cdc.Truncate && h.lastShape[tbl] == shape && !moved {
		return
	}
	h.lastShape[tbl] = shape
	if rel != "" {
		h.relTable[rel] = tbl
	}
	h.schemas = append(h.schemas, tbl+" "+ev.Op.String()+eventSchemaNote(ev))
}

// schemaTrace returns the schema trace (traceSchema).
func (h *historySink) schemaTrace() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.schemas)
}
