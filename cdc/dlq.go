package cdc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"
)

// DeadLetterWriter stores events the pipeline cannot apply: malformed events and rows the
// sink refused. The runner calls it after the sink acknowledged a batch and before it saves
// the batch's checkpoint, so a dead letter is durable before its event is behind the
// checkpoint; after a crash the same dead letters may be written again.
type DeadLetterWriter interface {
	// WriteDeadLetters stores the records durably, in order, or fails (which stops the pipeline).
	WriteDeadLetters(ctx context.Context, records []DeadLetterRecord) error
}

// DeadLetterRecord is one dead-lettered event.
type DeadLetterRecord struct {
	Pipeline string
	Reason   string    // why, without row data
	Time     time.Time // when the runner dead-lettered it
	// Event is the whole event, row values included, so the row can be replayed once the
	// cause is fixed. A dead-letter queue is a store of rows, not a log: it is the one place
	// outside the destination where row data is written on purpose.
	Event Event
}

// DeadLetterLine is the JSON form of a DeadLetterRecord: one line of a FileDLQ, and what
// ReadDeadLetters decodes.
type DeadLetterLine struct {
	Time     time.Time       `json:"time"`
	Pipeline string          `json:"pipeline"`
	Table    DeadLetterTable `json:"table"`
	Op       string          `json:"op"`
	Position string          `json:"position,omitempty"`
	Version  int64           `json:"version,omitempty"`
	TxID     string          `json:"tx,omitempty"`
	// CommitTime is omitted for snapshot reads.
	CommitTime *time.Time `json:"commit_time,omitempty"`
	Reason     string     `json:"reason"`
	// Columns names and kinds the values of Before and After, in order (from the event's
	// schema; absent when the event had none).
	Columns []DeadLetterColumn `json:"columns,omitempty"`
	// Before and After hold the row in the normalized Value shapes' JSON forms (Base64 as
	// {"_base64": ...}, EpochMicros as a number, DECIMAL as a string); a non-finite float is
	// the string "NaN", "Infinity" or "-Infinity". Null when the event had no such image.
	Before []json.RawMessage `json:"before"`
	After  []json.RawMessage `json:"after"`
}

// DeadLetterTable is a TableID in a DeadLetterLine.
type DeadLetterTable struct {
	Connector string `json:"connector"`
	Source    string `json:"source"`
	Database  string `json:"database"`
	Schema    string `json:"schema,omitempty"`
	Table     string `json:"table"`
}

// DeadLetterColumn names one column in a DeadLetterLine.
type DeadLetterColumn struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// NewDeadLetterLine renders a record as its JSON line form.
func NewDeadLetterLine(rec DeadLetterRecord) DeadLetterLine {
	ev := &rec.Event
	l := DeadLetterLine{
		Time:     rec.Time.UTC(),
		Pipeline: rec.Pipeline,
		Table: DeadLetterTable{Connector: ev.Table.Connector, Source: ev.Table.Source, Database: ev.Table.Database,
			Schema: ev.Table.Schema, Table: ev.Table.Table},
		Op:     ev.Op.String(),
		TxID:   ev.TxID,
		Reason: rec.Reason,
		Before: encodeRow(ev.Before),
		After:  encodeRow(ev.After),
	}
	if ev.Position != nil {
		l.Position, l.Version = ev.Position.String(), ev.Position.Version()
	}
	if !ev.CommitTime.IsZero() {
		t := ev.CommitTime.UTC()
		l.CommitTime = &t
	}
	if ev.Schema != nil {
		for _, c := range ev.Schema.Columns {
			l.Columns = append(l.Columns, DeadLetterColumn{Name: c.Name, Kind: c.Kind.String()})
		}
	}
	return l
}

func encodeRow(row []Value) []json.RawMessage {
	if row == nil {
		return nil
	}
	out := make([]json.RawMessage, len(row))
	for i, v := range row {
		out[i] = encodeValue(v)
	}
	return out
}

// encodeValue never fails: a dead letter must be writable whatever the row holds. Errors of
// json.Marshal would quote the value, so they are replaced, not passed on.
func encodeValue(v Value) json.RawMessage {
	switch v := v.(type) {
	case float64:
		switch {
		case math.IsNaN(v):
			return json.RawMessage(`"NaN"`)
		case math.IsInf(v, 1):
			return json.RawMessage(`"Infinity"`)
		case math.IsInf(v, -1):
			return json.RawMessage(`"-Infinity"`)
		}
	case []Value:
		var b bytes.Buffer
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(encodeValue(e))
		}
		b.WriteByte(']')
		return b.Bytes()
	case json.RawMessage:
		if !json.Valid(v) {
			enc, _ := json.Marshal(map[string]string{"_invalid_json": string(v)})
			return enc
		}
	}
	enc, err := json.Marshal(v)
	if err != nil {
		enc, _ = json.Marshal(map[string]string{"_unencodable": fmt.Sprintf("%T", v)})
	}
	return enc
}

// FileDLQOptions configure OpenFileDLQ; the zero value (or nil) gives the defaults.
type FileDLQOptions struct {
	// Mode is the permission of a new file. Default 0600: dead letters hold row data.
	Mode os.FileMode
	// NoSync skips the fsync after each write (tests only: a dead letter must be durable before
	// its checkpoint is saved).
	NoSync bool
}

// FileDLQ is a DeadLetterWriter appending JSON lines (DeadLetterLine) to a file.
type FileDLQ struct {
	mu     sync.Mutex
	f      *os.File
	path   string
	noSync bool
	enc    lineEncoder // under mu
	buf    []byte      // under mu: the last write's lines, reused
}

var _ DeadLetterWriter = (*FileDLQ)(nil)

// OpenFileDLQ opens path for appending, creating it when missing. A last line torn by a crash
// is ended, so the next record starts on a line of its own.
func OpenFileDLQ(path string, opts *FileDLQOptions) (*FileDLQ, error) {
	var o FileDLQOptions
	if opts != nil {
		o = *opts
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, o.Mode)
	if err != nil {
		return nil, fmt.Errorf("cdc: dead-letter file: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			_, err = f.Write([]byte{'\n'})
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cdc: dead-letter file %s: repairing its last line: %w", path, err)
		}
	}
	return &FileDLQ{f: f, path: path, noSync: o.NoSync}, nil
}

// WriteDeadLetters implements DeadLetterWriter: all records in one append, then fsync.
func (d *FileDLQ) WriteDeadLetters(ctx context.Context, records []DeadLetterRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return fmt.Errorf("cdc: dead-letter file %s: %w", d.path, os.ErrClosed)
	}
	buf := d.buf[:0]
	for i := range records {
		buf = d.enc.appendLine(buf, &records[i])
	}
	if cap(buf) <= 1<<20 { // keep a batch's worth, not the largest batch ever
		d.buf = buf
	}
	if _, err := d.f.Write(buf); err != nil {
		return fmt.Errorf("cdc: dead-letter file %s: %w", d.path, err)
	}
	if !d.noSync {
		if err := d.f.Sync(); err != nil {
			return fmt.Errorf("cdc: dead-letter file %s: %w", d.path, err)
		}
	}
	return nil
}

// Close closes the file.
func (d *FileDLQ) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// ReadDeadLetters decodes a dead-letter file's lines. Lines that do not decode (a line torn by
// a crash) are skipped and counted in torn.
func ReadDeadLetters(r io.Reader) (lines []DeadLetterLine, torn int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l DeadLetterLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			torn++
			continue
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return lines, torn, fmt.Errorf("cdc: reading dead letters: %w", err)
	}
	return lines, torn, nil
}
