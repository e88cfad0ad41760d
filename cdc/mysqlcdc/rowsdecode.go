package mysqlcdc

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// Row images are decoded straight from the event's bytes into normalized values. go-mysql's
// parser still reads every event, table maps included, and the rows event's header; its hook
// for a rows event's body (SetRowsEventDecodeFunc) keeps the images undecoded, and the reader,
// which knows each column's schema, decodes them. go-mysql's own decoding would box every
// value into an interface, format temporal values with fmt, and hand over strings that we
// would then parse, copy or re-encode: most of the cost of a row.

// undecoded holds a rows event's row images, as the hook left them in RowsEvent.Rows.
type undecoded []byte

// deferRows is the parser's rows-event hook: the header only (table, flags, column bitmaps);
// the images stay bytes. It runs on the syncer's goroutine and so touches no reader state.
func deferRows(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	// The syncer hands each event a buffer of its own (go-mysql's decoded rows alias it too),
	// so the slice stays valid.
	e.Rows = [][]any{{undecoded(data[pos:])}}
	return nil
}

// pendingImages returns the images deferRows kept, if it did.
func pendingImages(e *replication.RowsEvent) (undecoded, bool) {
	if len(e.Rows) != 1 || len(e.Rows[0]) != 1 {
		return nil, false
	}
	b, ok := e.Rows[0][0].(undecoded)
	return b, ok
}

// imageLayout says how the images of an event type are laid out: whether each row has an
// after image following the before image, and whether the body is compressed. ok is false
// for layouts decoded by go-mysql instead (the v0 events of MySQL 5.1, MySQL's partial JSON
// updates).
func imageLayout(t replication.EventType) (pair, compressed, ok bool) {
	switch t {
	case replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2,
		replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
		return false, false, true
	case replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
		return true, false, true
	case replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		return false, true, true
	case replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1:
		return true, true, true
	}
	return false, false, false
}

// errCorruptRows says a rows event's images do not fit its table map. Like a parse error of
// go-mysql's, it ends the binlog connection (the event is read again after reconnecting).
var errCorruptRows = errors.New("mysqlcdc: rows event does not match its table map")

// decodeWithGoMySQL decodes kept images with go-mysql's decoder, into e.Rows, for the event
// layouts and column types the direct decoder leaves to it.
func decodeWithGoMySQL(e *replication.RowsEvent, images undecoded) (err error) {
	e.Rows, e.SkippedColumns = nil, nil
	defer func() {
		// DecodeData recovers the panics of its image decoding, not those before it (its
		// decompression of a MariaDB compressed event, which rows checked first).
		if p := recover(); p != nil {
			if _, ok := p.(runtime.Error); !ok {
				panic(p)
			}
			err = &binlogError{op: "decode rows event", err: errCorruptRows}
		}
	}()
	if err := e.DecodeData(0, images); err != nil {
		// Its message may quote the images (row data); the cause is kept for errors.As only.
		return &binlogError{op: "decode rows event", err: &quietError{msg: "go-mysql cannot decode the row images", cause: err}}
	}
	return nil
}

// framed says whether a rows event's header fits its table map and lets its images be read:
// as many columns as the table map has (the server writes both from the same table), and a
// column present in some image when there are images -- an image of no column takes no bytes,
// and a reader of such images (ours, countRows, go-mysql's DecodeData) would never reach the
// end of the event.
func framed(e *replication.RowsEvent, images undecoded) bool {
	if e.ColumnCount != e.Table.ColumnCount {
		return false
	}
	if len(images) == 0 {
		return true
	}
	n := int(e.ColumnCount)
	return countBits(e.ColumnBitmap1, n) > 0 || e.ColumnBitmap2 != nil && countBits(e.ColumnBitmap2, n) > 0
}

// errNotFinite says a FLOAT or DOUBLE holds a NaN or an infinity, which no column stores (and
// JSON cannot spell).
var errNotFinite = errors.New("mysqlcdc: FLOAT or DOUBLE value is not a finite number")

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// maxImages bounds the uncompressed images of a MariaDB compressed rows event: a rows event is
// cut below max_allowed_packet, 1 GiB at most.
const maxImages = 1 << 30

var errCompressedFraming = errors.New("mysqlcdc: compressed rows event: the header does not fit the event")

// decompressImages inflates the images of a MariaDB compressed rows event: a byte whose low
// three bits are the width (1 to 4) of the big-endian uncompressed size, then a zlib stream.
// Unlike mysql.DecompressMariadbData, it checks the header against the bytes there and
// allocates what the stream inflates to, not what the header states.
func decompressImages(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return nil, errCompressedFraming
	}
	w := int(data[0] & 0x07)
	if w < 1 || w > 4 || len(data) < 1+w {
		return nil, errCompressedFraming
	}
	size := int(beUint(data[1:], w))
	if size > maxImages {
		return nil, errCompressedFraming
	}
	r, err := zlib.NewReader(bytes.NewReader(data[1+w:]))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out bytes.Buffer
	// zlib inflates 1032 times at most: a size beyond that is no size of these bytes.
	out.Grow(min(size, 1032*len(data)))
	if _, err := io.Copy(&out, io.LimitReader(r, int64(size)+1)); err != nil {
		return nil, err
	}
	if out.Len() != size {
		return nil, errCompressedFraming
	}
	return out.Bytes(), nil
}

// colPlan is how one column's binlog bytes are read: the type as stored (CHAR, ENUM and SET
// share a type code; their real type hides in the metadata) and the codec that normalizes.
type colPlan struct {
	tp     byte
	meta   uint16
	strLen int // MYSQL_TYPE_STRING: the declared byte length, which decides the length prefix
	codec  *colCodec
	name   string
}

// realType unpacks a column's stored type and, for MYSQL_TYPE_STRING, its byte length.
func realType(tp byte, meta uint16) (byte, int) {
	if tp != mysql.MYSQL_TYPE_STRING {
		return tp, 0
	}
	if meta < 256 {
		return tp, int(meta)
	}
	b0, b1 := byte(meta>>8), byte(meta)
	if b0&0x30 != 0x30 {
		return b0 | 0x30, int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
	}
	return b0, int(b1)
}

// directlyDecoded says whether a codec class reads a stored type exactly as go-mysql's decoding
// followed by fromBinlog would. Other pairs -- MySQL's binary JSON, types only the server's
// text describes (classOther), pairs no schema produces -- go through go-mysql.
func directlyDecoded(c class, tp byte) bool {
	if tp == mysql.MYSQL_TYPE_NULL {
		return true
	}
	switch c {
	case classInt:
		return isIntType(tp) || tp == mysql.MYSQL_TYPE_YEAR
	case classUint:
		return isIntType(tp)
	case classFloat32:
		return tp == mysql.MYSQL_TYPE_FLOAT
	case classFloat64:
		return tp == mysql.MYSQL_TYPE_DOUBLE
	case classDecimal:
		return tp == mysql.MYSQL_TYPE_NEWDECIMAL
	case classBit:
		return tp == mysql.MYSQL_TYPE_BIT
	case classString, classText, classJSON:
		return isStringType(tp) || tp == mysql.MYSQL_TYPE_BLOB
	case classBinary:
		return isStringType(tp) || tp == mysql.MYSQL_TYPE_BLOB || tp == mysql.MYSQL_TYPE_GEOMETRY || tp == mysql.MYSQL_TYPE_VECTOR
	case classEnum:
		return tp == mysql.MYSQL_TYPE_ENUM
	case classSet:
		return tp == mysql.MYSQL_TYPE_SET
	case classTemporal:
		switch tp {
		case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2,
			mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2:
			return true
		}
	case classTimestamp:
		return tp == mysql.MYSQL_TYPE_TIMESTAMP || tp == mysql.MYSQL_TYPE_TIMESTAMP2
	case classUUID, classInet4, classInet6:
		return isStringType(tp)
	}
	return false
}

func isIntType(tp byte) bool {
	switch tp {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		return true
	}
	return false
}

func isStringType(tp byte) bool {
	return tp == mysql.MYSQL_TYPE_VARCHAR || tp == mysql.MYSQL_TYPE_VAR_STRING || tp == mysql.MYSQL_TYPE_STRING
}

// planFor returns how to read t's columns from images described by tm; ok is false when some
// column is left to go-mysql. The plan is kept for the table map, which serves a transaction.
func (t *table) planFor(tm *replication.TableMapEvent) ([]colPlan, bool) {
	if t.planTM == tm || t.planTM != nil && sameTableMap(t.planTM, tm) {
		t.planTM = tm
		return t.plan, t.plan != nil
	}
	t.planTM, t.plan = tm, nil
	if int(tm.ColumnCount) != len(t.codecs) || len(tm.ColumnType) != len(t.codecs) || len(tm.ColumnMeta) != len(t.codecs) {
		return nil, false
	}
	plan := make([]colPlan, len(t.codecs))
	for i := range plan {
		tp, n := realType(tm.ColumnType[i], tm.ColumnMeta[i])
		if !directlyDecoded(t.codecs[i].class, tp) {
			return nil, false
		}
		plan[i] = colPlan{tp: tp, meta: tm.ColumnMeta[i], strLen: n, codec: &t.codecs[i], name: t.schema.Columns[i].Name}
	}
	t.plan = plan
	return plan, true
}

// rowDecoder reads the images of one rows event.
type rowDecoder struct {
	plan    []colPlan
	bitmap1 []byte
	bitmap2 []byte
	present [2]int // columns present in each image
	done    int    // images read
	data    []byte
	pos     int
	// slab backs the rows' value slices: one allocation for many rows instead of one per row.
	slab []cdc.Value

	// An update's before image, to share its values with the after image: an update usually
	// changes a few columns, and equal bytes decode to equal (immutable) values.
	before []cdc.Value
	spans  [][2]int // each column's bytes in the before image; {0, 0} when absent or NULL
}

func newRowDecoder(plan []colPlan, e *replication.RowsEvent, pair bool, data []byte) *rowDecoder {
	d := &rowDecoder{plan: plan, bitmap1: e.ColumnBitmap1, data: data}
	d.present[0] = countBits(e.ColumnBitmap1, len(plan))
	if pair {
		d.bitmap2 = e.ColumnBitmap2
		d.present[1] = countBits(e.ColumnBitmap2, len(plan))
		d.spans = make([][2]int, len(plan))
	}
	return d
}

func countBits(bitmap []byte, n int) int {
	c := 0
	for i := range n {
		if bitmap[i>>3]&(1<<(i&7)) != 0 {
			c++
		}
	}
	return c
}

func (d *rowDecoder) more() bool { return d.pos < len(d.data) }

// slabRows is how many images one value slab holds at most: fewer keeps a long-lived event from pinning
// much of its neighbours' memory, more saves allocations.
const slabRows = 32

// next decodes the next image (second selects the after image's column bitmap). A value that
// cannot be normalized is reported as the column's error after the image was read, so the
// next image can still be found; a malformed image panics with an index error, which
// decodeAll turns into errCorruptRows.
func (d *rowDecoder) next(second bool) ([]cdc.Value, error) {
	bitmap, present := d.bitmap1, d.present[0]
	if second {
		bitmap, present = d.bitmap2, d.present[1]
	}
	n := len(d.plan)
	if len(d.slab) < n {
		// As many images as the rest of the event seems to hold, judging by those read so far
		// (one for the first): a one-row event must not pay for 32.
		images := 1
		if d.done > 0 {
			images = min(slabRows, 1+(len(d.data)-d.pos)*d.done/d.pos)
		}
		d.slab = make([]cdc.Value, n*images)
	}
	row := d.slab[:n:n]
	d.slab = d.slab[n:]
	d.done++
	nulls := d.data[d.pos : d.pos+(present+7)/8]
	d.pos += len(nulls)
	record, share := d.spans != nil && !second, d.spans != nil && second
	if record {
		clear(d.spans)
		d.before = row
	}
	var firstErr error
	k := 0
	for i := range d.plan {
		if bitmap[i>>3]&(1<<(i&7)) == 0 {
			continue // not in this image: like go-mysql, the value stays nil
		}
		null := nulls[k>>3]&(1<<(k&7)) != 0
		k++
		if null {
			continue
		}
		p := &d.plan[i]
		if sp := d.spans; share && sp[i][1] > 0 {
			size := valueSize(d.data[d.pos:], p.tp, p.meta, p.strLen)
			if size == sp[i][1]-sp[i][0] && string(d.data[d.pos:d.pos+size]) == string(d.data[sp[i][0]:sp[i][1]]) {
				row[i] = d.before[i]
				d.pos += size
				continue
			}
		}
		v, size, err := p.decode(d.data[d.pos:])
		if size < 0 {
			panic(errCorruptRows)
		}
		if record && size > 0 {
			d.spans[i] = [2]int{d.pos, d.pos + size}
		}
		d.pos += size
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("column %q: %w", p.name, err)
		}
		row[i] = v
	}
	return row, firstErr
}

// decode reads one value of a plan's column and normalizes it; size is the bytes it took.
func (p *colPlan) decode(b []byte) (v cdc.Value, size int, err error) {
	c := p.codec
	switch p.tp {
	case mysql.MYSQL_TYPE_NULL:
		return nil, 0, nil
	case mysql.MYSQL_TYPE_TINY:
		return c.integer(int64(int8(b[0]))), 1, nil
	case mysql.MYSQL_TYPE_SHORT:
		return c.integer(int64(int16(binary.LittleEndian.Uint16(b)))), 2, nil
	case mysql.MYSQL_TYPE_INT24:
		u := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		return c.integer(int64(int32(u<<8) >> 8)), 3, nil
	case mysql.MYSQL_TYPE_LONG:
		return c.integer(int64(int32(binary.LittleEndian.Uint32(b)))), 4, nil
	case mysql.MYSQL_TYPE_LONGLONG:
		return c.integer(int64(binary.LittleEndian.Uint64(b))), 8, nil
	case mysql.MYSQL_TYPE_YEAR:
		y := int64(b[0])
		if y != 0 {
			y += 1900
		}
		return y, 1, nil
	case mysql.MYSQL_TYPE_FLOAT:
		f := math.Float32frombits(binary.LittleEndian.Uint32(b))
		if !finite(float64(f)) {
			return nil, 4, errNotFinite
		}
		return shortestFloat32(f), 4, nil
	case mysql.MYSQL_TYPE_DOUBLE:
		f := math.Float64frombits(binary.LittleEndian.Uint64(b))
		if !finite(f) {
			return nil, 8, errNotFinite
		}
		return f, 8, nil
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		s, n := decimalText(b, int(p.meta>>8), int(p.meta&0xff))
		return s, n, nil
	case mysql.MYSQL_TYPE_BIT:
		nbits := int(p.meta>>8)*8 + int(p.meta&0xff)
		n := (nbits + 7) / 8
		if n < 1 || n > 8 {
			return nil, n, fmt.Errorf("mysqlcdc: BIT value of %d bytes", n)
		}
		var u uint64
		for _, x := range b[:n] {
			u = u<<8 | uint64(x)
		}
		return u, n, nil
	case mysql.MYSQL_TYPE_ENUM:
		switch p.meta & 0xff {
		case 1:
			v, err := c.enumLabel(uint64(b[0]))
			return v, 1, err
		case 2:
			v, err := c.enumLabel(uint64(binary.LittleEndian.Uint16(b)))
			return v, 2, err
		}
		return nil, -1, nil // go-mysql cannot size it either
	case mysql.MYSQL_TYPE_SET:
		n := int(p.meta & 0xff)
		if n < 1 || n > 8 {
			return nil, -1, nil
		}
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		v, err := c.setLabels(u)
		return v, n, err
	case mysql.MYSQL_TYPE_DATE:
		return dateText(b), 3, nil
	case mysql.MYSQL_TYPE_TIME:
		return oldTimeText(b), 3, nil
	case mysql.MYSQL_TYPE_TIME2:
		if p.meta > 6 {
			return nil, -1, nil // no server stores more than 6 fraction digits
		}
		s, n := time2Text(b, p.meta)
		if !timeTextOK(s, int(p.meta)) {
			return nil, n, errTemporalRange
		}
		return s, n, nil
	case mysql.MYSQL_TYPE_DATETIME:
		return oldDatetimeText(b), 8, nil
	case mysql.MYSQL_TYPE_DATETIME2:
		if p.meta > 6 {
			return nil, -1, nil
		}
		s, n := datetime2Text(b, p.meta)
		if b[0]&0x80 == 0 || !datetimeTextOK(s, int(p.meta)) { // the sign bit: DATETIME2 is never negative
			return nil, n, errTemporalRange
		}
		return s, n, nil
	case mysql.MYSQL_TYPE_TIMESTAMP:
		return cdc.EpochMicros(int64(binary.LittleEndian.Uint32(b)) * 1_000_000), 4, nil
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		if p.meta > 6 {
			return nil, -1, nil
		}
		us, n := timestamp2Micros(b, p.meta)
		if fraction(b[4:], p.meta) > 999_999 {
			return nil, n, errTemporalRange
		}
		return cdc.EpochMicros(us), n, nil
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		s, n := lengthPrefixed(b, int(p.meta))
		v, err := c.bytesValue(s)
		return v, n, err
	case mysql.MYSQL_TYPE_STRING:
		s, n := lengthPrefixed(b, p.strLen)
		v, err := c.bytesValue(s)
		return v, n, err
	case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_VECTOR:
		var l, h int
		switch p.meta {
		case 1:
			l, h = int(b[0]), 1
		case 2:
			l, h = int(binary.LittleEndian.Uint16(b)), 2
		case 3:
			l, h = int(b[0])|int(b[1])<<8|int(b[2])<<16, 3
		case 4:
			l, h = int(binary.LittleEndian.Uint32(b)), 4
		default:
			return nil, -1, nil
		}
		v, err := c.bytesValue(b[h : h+l])
		return v, h + l, err
	}
	return nil, -1, nil // planFor admits no other type
}

// integer normalizes an integer column's value, signed as stored.
func (c *colCodec) integer(n int64) cdc.Value {
	if c.class == classInt {
		return n
	}
	u := uint64(n)
	if c.bits < 64 {
		u &= 1<<c.bits - 1
	}
	return u
}

// bytesValue normalizes a string or blob column's bytes (which alias the event buffer).
func (c *colCodec) bytesValue(b []byte) (cdc.Value, error) {
	switch c.class {
	case classString:
		switch {
		case c.utf8:
			// Not copied: like go-mysql's own decoded strings, the value shares the event's
			// buffer, which the syncer allocates for each event and never writes again.
			return unsafe.String(unsafe.SliceData(b), len(b)), nil
		case c.byteMap != nil:
			return decodeByteMap(c.byteMap, b), nil
		}
		return decodeText(c.charset, b)
	case classText:
		return base64Value(b, 0), nil
	case classBinary:
		return base64Value(b, c.padTo), nil
	case classJSON:
		return compactJSON(b)
	case classUUID, classInet4, classInet6:
		return c.addressText(unsafe.String(unsafe.SliceData(b), len(b))) // read, not kept
	}
	return nil, fmt.Errorf("mysqlcdc: binlog bytes for a %v column", c.kind)
}

// lengthPrefixed reads a CHAR or VARCHAR value: a one-byte length when the column's byte
// length is below 256, else two bytes.
func lengthPrefixed(b []byte, maxLen int) ([]byte, int) {
	if maxLen < 256 {
		l := int(b[0])
		return b[1 : 1+l], 1 + l
	}
	l := int(binary.LittleEndian.Uint16(b))
	return b[2 : 2+l], 2 + l
}

// countRows counts the rows of an event without normalizing values, for tables not captured
// (the GTID version ordinal counts every row change of a transaction). ok is false when some
// column's size is not known here.
func countRows(tm *replication.TableMapEvent, e *replication.RowsEvent, pair bool, data []byte) (rows int, ok bool) {
	return walkImages(tm, e, pair, data, nil)
}

// walkImages finds each value of an event's images, calls each (when not nil) with its column's
// stored type and bytes, and counts the rows. ok is false when some column's size is not known
// here, the images do not fit their event, or each returned false.
func walkImages(tm *replication.TableMapEvent, e *replication.RowsEvent, pair bool, data []byte,
	each func(tp byte, meta uint16, v []byte) bool) (rows int, ok bool) {
	defer func() {
		if recover() != nil {
			rows, ok = 0, false
		}
	}()
	n := int(tm.ColumnCount)
	bitmaps := [2][]byte{e.ColumnBitmap1, e.ColumnBitmap2}
	var present [2]int
	images := 1
	if pair {
		images = 2
	}
	for k := range images {
		present[k] = countBits(bitmaps[k], n)
	}
	pos := 0
	for pos < len(data) {
		for k := range images {
			nulls := data[pos : pos+(present[k]+7)/8]
			pos += len(nulls)
			j := 0
			for i := range n {
				if bitmaps[k][i>>3]&(1<<(i&7)) == 0 {
					continue
				}
				null := nulls[j>>3]&(1<<(j&7)) != 0
				j++
				if null {
					continue
				}
				tp, strLen := realType(tm.ColumnType[i], tm.ColumnMeta[i])
				size := valueSize(data[pos:], tp, tm.ColumnMeta[i], strLen)
				if size < 0 {
					return 0, false
				}
				if each != nil && !each(tp, tm.ColumnMeta[i], data[pos:pos+size]) {
					return 0, false
				}
				pos += size
			}
		}
		rows++
	}
	return rows, true
}

// hasBinaryJSON says whether a table map has a column of MySQL's binary JSON.
func hasBinaryJSON(tm *replication.TableMapEvent) bool {
	return bytes.IndexByte(tm.ColumnType, mysql.MYSQL_TYPE_JSON) >= 0
}

// binaryJSONBounded says whether every MySQL binary JSON value of an event's images decodes,
// with go-mysql, in work and memory within its size. go-mysql follows a container's value
// offsets wherever they point: entries of a few bytes that point at the same nested container,
// level after level, double its decoded size with each level (20 levels, 205 bytes: 209 MB
// allocated, 5 MB of JSON text; 30 levels: more memory than a machine has). The server stores each value once, so a document has fewer
// values than bytes; this walk follows the offsets as go-mysql does and gives up beyond that
// or beyond maxJSONDepth levels.
func binaryJSONBounded(tm *replication.TableMapEvent, e *replication.RowsEvent, pair bool, data []byte) bool {
	_, ok := walkImages(tm, e, pair, data, func(tp byte, meta uint16, v []byte) bool {
		if tp != mysql.MYSQL_TYPE_JSON || len(v) <= int(meta) {
			return true
		}
		doc := v[meta:] // after its length
		budget := len(doc)
		return walkBinaryJSON(doc[0], doc[1:], &budget, 0)
	})
	return ok
}

// walkBinaryJSON follows a binary JSON value of type tp in data as go-mysql's decoder does,
// taking one of budget per value entry; false when the budget or the depth runs out. Parts
// go-mysql refuses (a container beyond its data, an offset beyond it) are skipped: its error
// reports them.
func walkBinaryJSON(tp byte, data []byte, budget *int, depth int) bool {
	var w, keyEntry, valueEntry int // offset width, key and value entry sizes
	switch tp {
	case 0x00, 0x02: // small object, small array
		w, keyEntry, valueEntry = 2, 4, 3
	case 0x01, 0x03: // large object, large array
		w, keyEntry, valueEntry = 4, 6, 5
	default:
		return true // scalars are read within their bytes
	}
	if depth >= maxJSONDepth {
		return false
	}
	if len(data) < 2*w {
		return true
	}
	count, size := int(leUint(data, w)), int(leUint(data[w:], w))
	if size > len(data) {
		return true
	}
	header := 2*w + count*valueEntry
	if tp == 0x00 || tp == 0x01 {
		header += count * keyEntry
	}
	if count < 0 || header > size {
		return true
	}
	if *budget -= count; *budget < 0 {
		return false
	}
	entries := header - count*valueEntry
	for i := range count {
		e := data[entries+i*valueEntry:]
		switch t := e[0]; {
		case t == 0x04 || t == 0x05 || t == 0x06, w == 4 && (t == 0x07 || t == 0x08):
			continue // literal, int16, uint16 (large containers: int32, uint32 too) are inlined
		default:
			if off := int(leUint(e[1:], w)); off < len(data) && !walkBinaryJSON(t, data[off:], budget, depth+1) {
				return false
			}
		}
	}
	return true
}

// leUint reads n bytes little-endian.
func leUint(b []byte, n int) uint64 {
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// valueSize is the number of bytes a stored value takes, -1 for a type not sized here.
func valueSize(b []byte, tp byte, meta uint16, strLen int) int {
	switch tp {
	case mysql.MYSQL_TYPE_NULL:
		return 0
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_YEAR:
		return 1
	case mysql.MYSQL_TYPE_SHORT:
		return 2
	case mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_TIME:
		return 3
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_TIMESTAMP:
		return 4
	case mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DOUBLE, mysql.MYSQL_TYPE_DATETIME:
		return 8
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		return decimalSize(int(meta>>8), int(meta&0xff))
	case mysql.MYSQL_TYPE_BIT:
		return (int(meta>>8)*8 + int(meta&0xff) + 7) / 8
	case mysql.MYSQL_TYPE_ENUM:
		if l := int(meta & 0xff); l == 1 || l == 2 {
			return l
		}
	case mysql.MYSQL_TYPE_SET:
		return int(meta & 0xff)
	case mysql.MYSQL_TYPE_TIME2, mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP2:
		if meta > 6 {
			return -1
		}
		return map[byte]int{mysql.MYSQL_TYPE_TIME2: 3, mysql.MYSQL_TYPE_DATETIME2: 5, mysql.MYSQL_TYPE_TIMESTAMP2: 4}[tp] + (int(meta)+1)/2
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		_, n := lengthPrefixed(b, int(meta))
		return n
	case mysql.MYSQL_TYPE_STRING:
		_, n := lengthPrefixed(b, strLen)
		return n
	case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_VECTOR, mysql.MYSQL_TYPE_JSON:
		// JSON: a length of meta bytes, then the document.
		if meta < 1 || meta > 4 {
			return -1
		}
		l := 0
		for i := int(meta) - 1; i >= 0; i-- {
			l = l<<8 | int(b[i])
		}
		return int(meta) + l
	}
	return -1
}

// quietError stands for an error whose message may carry row data: it says what failed, and
// keeps the cause reachable through errors.Is and errors.As.
type quietError struct {
	msg   string
	cause error
}

func (e *quietError) Error() string { return e.msg }
func (e *quietError) Unwrap() error { return e.cause }
