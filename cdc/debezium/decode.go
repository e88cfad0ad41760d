package debezium

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Record is one Kafka record of a Debezium topic: what the decoder reads.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte // nil for a record without a key
	Value     []byte // nil for a tombstone
	// Headers are the record's headers; the decoder reads __debezium.oldkey and
	// __debezium.newkey, which mark the two halves of a primary-key change.
	Headers []Header
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// The headers Debezium puts on the delete (newkey) and the create (oldkey) it writes for an
// update that changes the primary key: each holds the other key's fields as JSON.
const (
	headerNewKey = "__debezium.newkey"
	headerOldKey = "__debezium.oldkey"
)

func (r *Record) header(key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// Versions chooses how MySQL and MariaDB change events are versioned (PostgreSQL's are always
// the change's LSN).
type Versions uint8

const (
	// VersionsDefault: GTID versions for the mariadb connector, file versions for mysql, as
	// mysqlcdc's default positioning does.
	VersionsDefault Versions = iota
	// VersionsGTID: sequence number << 20 | the change's place in its transaction
	// (transaction.total_order - 1); needs provide.transaction.metadata=true.
	VersionsGTID
	// VersionsFile: binlog file index << 45 | event position << 13 | row within the event.
	VersionsFile
)

// A record the decoder has no event for.
type skipReason uint8

const (
	keep            skipReason = iota
	skipTombstone              // the null value Debezium writes after a delete, for compaction
	skipTransaction            // a transaction's BEGIN or END on the transaction topic
	skipSchema                 // a schema change event, a heartbeat or a logical decoding message
	skipKeyChange              // the delete half of a key change: the create half deletes the old key
)

type envelope struct {
	Schema  json.RawMessage `json:"schema"`
	Payload json.RawMessage `json:"payload"`
}

// payload is what parsePayload reads of a change event's payload.
type payload struct {
	Before, After json.RawMessage // raw slices of the record
	Source        *sourceBlock
	Op            string
	Transaction   *txBlock
	// Members of the other records that share Debezium's topics.
	Status string          // transaction metadata: BEGIN, END
	DDL    json.RawMessage // schema change events
}

type sourceBlock struct {
	Connector string          `json:"connector"`
	Name      string          `json:"name"`
	TsMs      int64           `json:"ts_ms"`
	Snapshot  json.RawMessage `json:"snapshot"` // "true", "first", "last", "incremental", "false"; older versions a boolean
	DB        string          `json:"db"`
	Schema    string          `json:"schema"`
	Table     string          `json:"table"`
	TxID      *int64          `json:"txId"`
	LSN       *int64          `json:"lsn"`
	GTID      *string         `json:"gtid"`
	File      string          `json:"file"`
	Pos       *int64          `json:"pos"`
	Row       *int64          `json:"row"`
}

type txBlock struct {
	ID         string `json:"id"`
	TotalOrder int64  `json:"total_order"`
}

func (s *sourceBlock) snapshot() bool {
	switch string(s.Snapshot) {
	case "", "null", `"false"`, "false":
		return false
	}
	return true
}

// Position is where a Debezium change event was in its source's history and in Kafka.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
	version   int64
	source    string // the source position as the envelope gave it
}

// Version implements cdc.Position.
func (p Position) Version() int64 { return p.version }

// String renders the source position and the record's place in Kafka.
func (p Position) String() string {
	return p.source + " (" + p.Topic + "[" + strconv.Itoa(int(p.Partition)) + "]@" + strconv.FormatInt(p.Offset, 10) + ")"
}

// decoder turns records into events. One decoder serves one stream; it is not safe for
// concurrent use.
type decoder struct {
	name     string
	infer    bool
	versions Versions
	shapes   map[string]*shapeEntry // by the value schema's text

	lastSchema map[string][]byte // by topic: the schema text of its last record, to skip it by comparison

	catalog       cdc.SchemaLoader // for records without an embedded schema; nil: refused
	decimalString bool             // such records carry decimals as text (decimal.handling.mode=string)
	catalogShapes *catalogCache    // shared by a stream's decoders
	edge          edgeOptions      // Options.PlainDates
	warn          func(msg string, args ...any)
}

type shapeEntry struct {
	keySchema []byte // the key schema's text the shape was built with
	shape     *tableShape
	err       error // a failure every record with this schema shares
}

// configError is a failure of the connector's configuration rather than of one record: no
// record of the table can be decoded until it is changed, so the stream stops (permanently).
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

func newDecoder(name string, infer bool, v Versions) *decoder {
	return &decoder{name: name, infer: infer, versions: v, shapes: map[string]*shapeEntry{}, lastSchema: map[string][]byte{},
		catalogShapes: newCatalogCache(), warn: func(string, ...any) {}}
}

// decode returns the record's event, or why it has none. A record it cannot read becomes a
// Malformed event (its reason names the topic, partition and offset, never values); a
// configuration that cannot work is a *configError.
func (d *decoder) decode(r *Record) (cdc.Event, skipReason, error) {
	return d.decodeCtx(context.Background(), r)
}

// decodeCtx is decode with ctx bounding catalog reads; a catalog that cannot be read fails
// with an error wrapping errCatalog.
func (d *decoder) decodeCtx(ctx context.Context, r *Record) (cdc.Event, skipReason, error) {
	if r.Value == nil {
		return cdc.Event{}, skipTombstone, nil
	}
	env, err := d.splitRecord(r)
	if err != nil {
		return d.malformed(r, nil, "the record is not JSON"), keep, nil
	}
	schemaless := env.Schema == nil || string(env.Schema) == "null"
	payloadRaw := env.Payload
	if schemaless {
		if d.catalog == nil {
			return cdc.Event{}, keep, &configError{fmt.Errorf("topic %s: a record without an embedded schema: set value.converter.schemas.enable=true (and key.converter.schemas.enable=true) on the connector, or give the source the database's catalog", r.Topic)}
		}
		if payloadRaw == nil || string(payloadRaw) == "null" {
			payloadRaw = r.Value // schemas.enable=false: the value is the payload
		}
	}
	p, err := parsePayload(payloadRaw)
	if err != nil {
		return d.malformed(r, nil, "the payload is not a JSON object"), keep, nil
	}
	switch {
	case p.Status != "" && p.Op == "":
		return cdc.Event{}, skipTransaction, nil
	case p.DDL != nil || p.Op == "m" || (p.Op == "" && p.Source == nil):
		return cdc.Event{}, skipSchema, nil
	}
	if p.Source == nil {
		return d.malformed(r, nil, "the envelope has no source block"), keep, nil
	}
	id := d.tableID(p.Source)
	var op cdc.Op
	var oldKey []byte
	switch p.Op {
	case "c":
		op = cdc.Insert
		if k, ok := r.header(headerOldKey); ok {
			// The create half of a key change becomes the update a native source reports:
			// the old key in Before, so the old document is deleted at this version and
			// values left unchanged can be taken from it.
			op, oldKey = cdc.Update, k
		}
	case "u":
		op = cdc.Update
	case "d":
		if _, ok := r.header(headerNewKey); ok {
			return cdc.Event{}, skipKeyChange, nil
		}
		op = cdc.Delete
	case "r":
		op = cdc.Read
	case "t":
		op = cdc.Truncate
	default:
		return d.malformed(r, &id, "unknown op"), keep, nil
	}
	pos, err := d.position(r, p.Source, p.Transaction, op)
	if err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			return cdc.Event{}, keep, err
		}
		return d.malformed(r, &id, err.Error()), keep, nil
	}
	ev := cdc.Event{Op: op, Table: id, Position: pos}
	if op != cdc.Read {
		ev.CommitTime = time.UnixMilli(p.Source.TsMs).UTC()
		ev.TxID = d.txID(p.Source)
	}
	if op == cdc.Truncate {
		return ev, keep, nil
	}
	var shape *tableShape
	var catalog *catalogEntry
	if schemaless {
		if catalog, err = d.catalogShape(ctx, id, p.Source.Connector, nil); errors.Is(err, cdc.ErrTableNotFound) {
			return d.malformed(r, &id, "the table is not in the source's catalog (dropped or renamed since the record was written)"), keep, nil
		}
		if err != nil {
			return cdc.Event{}, keep, err
		}
		shape = catalog.shape
	} else if shape, err = d.shapeFor(r, env.Schema, id, p.Source.Connector); err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			return cdc.Event{}, keep, err
		}
		ev.Malformed = d.reason(r, err.Error())
		return ev, keep, nil
	}
	snapshotRead := op == cdc.Read || p.Source.snapshot()
	if snapshotRead {
		if err := shape.refuseSnapshot(); err != nil {
			return cdc.Event{}, keep, err
		}
	}
	var rowErr error
	for reloaded := false; ; {
		ev.Before, ev.After, rowErr = shape.rows(&p, op, oldKey, catalog)
		var uf *unknownFieldError
		if catalog == nil || !errors.As(rowErr, &uf) {
			break
		}
		if !reloaded {
			// A column the catalog did not have when it was read: read it again.
			if catalog, err = d.catalogShape(ctx, id, p.Source.Connector, catalog); err != nil {
				return cdc.Event{}, keep, err
			}
			shape, reloaded = catalog.shape, true
			continue
		}
		// A field the catalog still lacks belongs to a column dropped since the record was
		// written: left out from now on.
		catalog = d.markDropped(id, catalog, uf.name)
		d.warn("debezium: records hold a field the table no longer has; it is left out", "table", id.String(), "topic", r.Topic)
	}
	ev.Schema = shape.schema
	if rowErr == nil && !snapshotRead {
		rowErr = shape.checkCorrupt(ev.Before, ev.After)
	}
	if rowErr == nil {
		rowErr = shape.checkAfter(ev.After, snapshotRead)
	}
	if rowErr != nil {
		ev.Before, ev.After = nil, nil
		ev.Malformed = d.reason(r, rowErr.Error())
	}
	return ev, keep, nil
}

func (d *decoder) tableID(s *sourceBlock) cdc.TableID {
	id := cdc.TableID{Source: d.name, Database: s.DB, Table: s.Table}
	if s.Connector == "postgresql" {
		id.Connector, id.Schema = "postgres", s.Schema
	} else {
		id.Connector = "mysql"
	}
	return id
}

func (d *decoder) txID(s *sourceBlock) string {
	switch {
	case s.TxID != nil:
		return strconv.FormatInt(*s.TxID, 10)
	case s.GTID != nil:
		return *s.GTID
	}
	return ""
}

func (d *decoder) reason(r *Record, why string) error {
	return fmt.Errorf("debezium record %s[%d]@%d: %s", r.Topic, r.Partition, r.Offset, why)
}

// malformed is the event of a record that cannot be read; id may be nil when even its table
// is unknown (then the topic names it).
func (d *decoder) malformed(r *Record, id *cdc.TableID, why string) cdc.Event {
	ev := cdc.Event{Position: Position{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, source: "unknown position"}, Malformed: d.reason(r, why)}
	if id != nil {
		ev.Table = *id
	} else {
		ev.Table = cdc.TableID{Connector: "debezium", Source: d.name, Table: r.Topic}
	}
	return ev
}

// Versions below every streamed change for snapshot reads: see the package documentation.
const snapshotVersion = 0

const (
	gtidOrdinalBits = 20
	maxGTIDSeq      = 1<<(63-gtidOrdinalBits) - 1
	fileRowBits     = 13
	fileOffsetBits  = 32
	maxFileIndex    = 1<<(63-fileOffsetBits-fileRowBits) - 1
)

func (d *decoder) position(r *Record, s *sourceBlock, tx *txBlock, op cdc.Op) (Position, error) {
	pos := Position{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	snapshot := op == cdc.Read || s.snapshot()
	switch s.Connector {
	case "postgresql":
		if s.LSN == nil {
			return pos, errors.New("the source block has no lsn")
		}
		pos.source = "lsn " + formatLSN(*s.LSN)
		if snapshot {
			pos.source = "snapshot at " + pos.source
			pos.version = snapshotVersion
			return pos, nil
		}
		if *s.LSN < 0 {
			return pos, errors.New("a negative lsn")
		}
		pos.version = *s.LSN
		return pos, nil
	case "mysql", "mariadb":
	default:
		return pos, &configError{fmt.Errorf("topic %s: connector %q is not supported (postgresql, mysql, mariadb)", r.Topic, s.Connector)}
	}
	mode := d.versions
	if mode == VersionsDefault {
		mode = VersionsFile
		if s.Connector == "mariadb" {
			mode = VersionsGTID
		}
	}
	if snapshot {
		pos.source = "snapshot at " + s.File + ":" + int64String(s.Pos)
		pos.version = snapshotVersion
		return pos, nil
	}
	if mode == VersionsGTID {
		if s.GTID == nil {
			return pos, &configError{fmt.Errorf("topic %s: GTID versions need GTIDs, and a change event has none (enable GTIDs on the server, or choose file versions)", r.Topic)}
		}
		seq, err := gtidSequence(*s.GTID)
		if err != nil {
			return pos, err
		}
		if tx == nil || tx.TotalOrder < 1 {
			return pos, &configError{fmt.Errorf("topic %s: GTID versions need the change's place in its transaction: set provide.transaction.metadata=true on the connector", r.Topic)}
		}
		if seq > maxGTIDSeq {
			return pos, errors.New("a GTID sequence number beyond 2^43")
		}
		ord := min(tx.TotalOrder-1, 1<<gtidOrdinalBits-1)
		pos.version = seq<<gtidOrdinalBits | ord
		pos.source = "gtid " + *s.GTID + " #" + strconv.FormatInt(tx.TotalOrder, 10)
		return pos, nil
	}
	idx, err := binlogIndex(s.File)
	if err != nil {
		return pos, err
	}
	if s.Pos == nil || *s.Pos < 0 || *s.Pos >= 1<<fileOffsetBits {
		return pos, errors.New("a binlog position out of range")
	}
	row := int64(0)
	if s.Row != nil {
		row = *s.Row
	}
	if row < 0 || row >= 1<<fileRowBits {
		return pos, errors.New("a row index within its event beyond 2^13")
	}
	if idx > maxFileIndex {
		return pos, errors.New("a binlog file index beyond 2^18")
	}
	pos.version = idx<<(fileOffsetBits+fileRowBits) | *s.Pos<<fileRowBits | row
	pos.source = s.File + ":" + strconv.FormatInt(*s.Pos, 10) + " row " + strconv.FormatInt(row, 10)
	return pos, nil
}

func int64String(p *int64) string {
	if p == nil {
		return "?"
	}
	return strconv.FormatInt(*p, 10)
}

func formatLSN(lsn int64) string {
	u := uint64(lsn)
	return strings.ToUpper(strconv.FormatUint(u>>32, 16)) + "/" + strings.ToUpper(strconv.FormatUint(u&0xffffffff, 16))
}

// gtidSequence reads the sequence number of a MariaDB GTID (domain-server-sequence) or a
// MySQL one (uuid:sequence).
func gtidSequence(g string) (int64, error) {
	i := strings.LastIndexAny(g, "-:")
	if i < 0 {
		return 0, errors.New("a GTID that is neither domain-server-sequence nor uuid:sequence")
	}
	n, err := strconv.ParseInt(g[i+1:], 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("a GTID whose sequence number is not a number")
	}
	return n, nil
}

// binlogIndex reads the numeric suffix of a binlog file name (mysql-bin.000025 is 25).
func binlogIndex(file string) (int64, error) {
	i := strings.LastIndexByte(file, '.')
	if i < 0 {
		return 0, errors.New("a binlog file name without a numeric suffix")
	}
	n, err := strconv.ParseInt(file[i+1:], 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("a binlog file name without a numeric suffix")
	}
	return n, nil
}

// shapeFor returns the table's shape for the record's value schema (cached by its text).
func (d *decoder) shapeFor(r *Record, schemaRaw json.RawMessage, id cdc.TableID, connector string) (*tableShape, error) {
	keySchema := keySchemaOf(r.Key)
	if e, ok := d.shapes[string(schemaRaw)]; ok && bytes.Equal(e.keySchema, keySchema) {
		return e.shape, e.err
	}
	sh, err := d.buildShape(schemaRaw, keySchema, id, connector)
	var refused *cdc.StartError
	switch {
	case errors.Is(err, errNoSourceTypes):
		err = &configError{fmt.Errorf("table %s (topic %s): %w", id, r.Topic, err)}
	case errors.As(err, &refused):
		err = &configError{err}
	}
	if len(d.shapes) >= 4096 { // schemas change rarely; bound the cache all the same
		clear(d.shapes)
	}
	d.shapes[string(schemaRaw)] = &shapeEntry{keySchema: bytes.Clone(keySchema), shape: sh, err: err}
	return sh, err
}

func (d *decoder) buildShape(schemaRaw, keySchemaRaw []byte, id cdc.TableID, connector string) (*tableShape, error) {
	vs, err := decodeSchema(schemaRaw)
	if err != nil {
		return nil, err
	}
	row := vs.field("after")
	if row == nil {
		row = vs.field("before")
	}
	var key *connectSchema
	if len(keySchemaRaw) > 0 && string(keySchemaRaw) != "null" {
		if key, err = decodeSchema(keySchemaRaw); err != nil {
			return nil, err
		}
	}
	return buildShape(id, connector, row, key, d.infer, d.edge)
}

// keySchemaOf returns the key's schema text, nil for a record without a key.
func keySchemaOf(key []byte) []byte {
	if key == nil {
		return nil
	}
	env, err := splitEnvelope(key)
	if err != nil {
		return nil
	}
	return env.Schema
}

// splitEnvelope finds a JsonConverter record's schema and payload members without copying
// or validating them (both nil for a record without them: schemas.enable=false).
func splitEnvelope(b []byte) (envelope, error) {
	var env envelope
	err := eachMember(b, func(key, v []byte) error {
		switch string(key) {
		case "schema":
			env.Schema = v
		case "payload":
			env.Payload = v
		}
		return nil
	})
	return env, err
}

// splitRecord is splitEnvelope for a record value, fast when the record begins as
// JsonConverter writes it, {"schema":<the schema of the topic's last record>,"payload":...}:
// the schema is recognised by comparing bytes instead of scanning them.
func (d *decoder) splitRecord(r *Record) (envelope, error) {
	const head, mid = `{"schema":`, `,"payload":`
	b := r.Value
	if last := d.lastSchema[r.Topic]; last != nil && bytes.HasPrefix(b, []byte(head)) && bytes.HasPrefix(b[len(head):], last) {
		rest := b[len(head)+len(last):]
		if bytes.HasPrefix(rest, []byte(mid)) {
			body := bytes.TrimRight(rest[len(mid):], " \t\r\n")
			if n := len(body); n > 0 && body[n-1] == '}' {
				payload := body[:n-1]
				if end, err := skipValue(payload, 0); err == nil && skipSpace(payload, end) == len(payload) {
					return envelope{Schema: b[len(head) : len(head)+len(last)], Payload: bytes.TrimSpace(payload)}, nil
				}
			}
		}
	}
	env, err := splitEnvelope(b)
	if err == nil && env.Schema != nil {
		if len(d.lastSchema) >= 4096 {
			clear(d.lastSchema)
		}
		d.lastSchema[r.Topic] = bytes.Clone(env.Schema)
	}
	return env, err
}

// parsePayload reads a change event's payload: row images as raw slices of it, the source and
// transaction blocks decoded.
func parsePayload(b []byte) (payload, error) {
	var p payload
	err := eachMember(b, func(key, v []byte) error {
		switch string(key) {
		case "before":
			p.Before = v
		case "after":
			p.After = v
		case "op":
			op, err := jsonString(v)
			if err != nil && string(v) != "null" {
				return err
			}
			p.Op = op
		case "source":
			if string(v) != "null" {
				p.Source = &sourceBlock{}
				return json.Unmarshal(v, p.Source)
			}
		case "transaction":
			if string(v) != "null" {
				p.Transaction = &txBlock{}
				return json.Unmarshal(v, p.Transaction)
			}
		case "status":
			p.Status, _ = jsonString(v)
		case "ddl":
			p.DDL = v
		}
		return nil
	})
	return p, err
}

// unknownFieldError is a row image's field that a catalog's columns lack.
type unknownFieldError struct{ name string }

func (e *unknownFieldError) Error() string {
	return fmt.Sprintf("field %q is not a column of the table", e.name)
}

// rows decodes an event's row images: Before (the old key of a key change, or the before
// image of an update or delete) and After. With a catalog, a field its columns lack is an
// *unknownFieldError unless the catalog knows it as dropped.
func (sh *tableShape) rows(p *payload, op cdc.Op, oldKey []byte, catalog *catalogEntry) (before, after []cdc.Value, err error) {
	var dropped map[string]bool
	if catalog != nil {
		dropped = catalog.dropped
	}
	switch {
	case oldKey != nil:
		before, err = sh.keyRow(oldKey)
	case op == cdc.Update || op == cdc.Delete:
		before, err = sh.row(p.Before, false, dropped)
	}
	if err == nil && op != cdc.Delete {
		after, err = sh.row(p.After, op == cdc.Update, dropped)
		if after == nil && err == nil {
			err = errors.New("no after image")
		}
	}
	if op == cdc.Delete && before == nil && err == nil {
		err = errors.New("a delete without a before image")
	}
	return before, after, err
}

// row decodes a row image into the shape's column order; nil for a null image. dropped, nil
// for a shape from an embedded schema, names fields to leave out; another field the shape
// lacks is an error (an *unknownFieldError when dropped is not nil). In the after image of an
// update, Debezium's placeholder for an unchanged TOASTed value becomes cdc.Unchanged, as
// pgcdc reports it.
func (sh *tableShape) row(raw json.RawMessage, update bool, dropped map[string]bool) ([]cdc.Value, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	out := make([]cdc.Value, len(sh.columns))
	err := eachMember(raw, func(key, v []byte) error {
		i, ok := sh.byName[string(key)]
		if !ok {
			switch {
			case dropped == nil:
				return fmt.Errorf("field %q is not in the schema", key)
			case dropped[string(key)]:
				return nil
			}
			return &unknownFieldError{name: string(key)}
		}
		if string(v) == "null" {
			return nil
		}
		if isUnavailable(v) {
			if !update {
				return fmt.Errorf("column %q: the connector's placeholder for an unchanged value outside an update", key)
			}
			out[i] = cdc.Unchanged{}
			return nil
		}
		val, err := sh.columns[i].conv(v)
		if err != nil {
			return fmt.Errorf("column %q: %w", key, err)
		}
		out[i] = val
		return nil
	})
	if errors.Is(err, errBadJSON) {
		return nil, errors.New("a row image that is not a JSON object")
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkCorrupt refuses a streamed row holding a value of a column the connector corrupts.
func (sh *tableShape) checkCorrupt(rows ...[]cdc.Value) error {
	for _, i := range sh.corrupt {
		for _, row := range rows {
			if row != nil && row[i] != nil {
				return fmt.Errorf("column %q: debezium-connector-mariadb corrupts UUID values it reads from the binlog (verified in 3.5.0: a byte is lost)", sh.columns[i].col.Name)
			}
		}
	}
	return nil
}

// keyRow decodes a key header ({"col": value, ...}) into a row holding the key columns, the
// others nil.
func (sh *tableShape) keyRow(raw []byte) ([]cdc.Value, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, errors.New("the old key of a key change is not a JSON object")
	}
	out := make([]cdc.Value, len(sh.columns))
	for _, k := range sh.schema.PrimaryKey {
		name := sh.columns[k].col.Name
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return nil, fmt.Errorf("the old key of a key change lacks column %q", name)
		}
		val, err := sh.columns[k].conv(v)
		if err != nil {
			return nil, fmt.Errorf("old key column %q: %w", name, err)
		}
		out[k] = val
	}
	return out, nil
}

// isUnavailable reports whether v is Debezium's placeholder for an unchanged TOASTed value:
// the text, its bytes in base64, or an array holding the text.
func isUnavailable(v json.RawMessage) bool {
	s := bytes.TrimSpace(v)
	if len(s) > 0 && s[0] == '[' {
		s = bytes.TrimSpace(s[1:])
		if len(s) == 0 || s[len(s)-1] != ']' {
			return false
		}
		s = bytes.TrimSpace(s[:len(s)-1])
	}
	if len(s) < 2 || s[0] != '"' {
		return false
	}
	in := string(s[1 : len(s)-1])
	return in == unavailablePlaceholder || in == unavailableBytes
}
