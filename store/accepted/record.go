package accepted

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonenc"
	"github.com/tributary-dev/tributary/store"
)

// Version is the version of the queue record format that Append writes and
// Decode reads.
const Version = 1

// Record is one accepted-mode write as it travels through a durable queue: self-contained, so
// a worker can apply it with nothing but the record and the store configuration.
//
// # Wire format, version 1
//
// The message value is one JSON object. JSON because the documents are JSON already and go in
// unchanged (byte for byte, no re-encoding), because operators can read a dead-lettered record
// with ordinary tools, and because the version field lets the format change later. Members:
//
//	v               1
//	request         the accepting call's request id (32 hex digits)
//	index           the operation's position in that request
//	accepted_at     when the store accepted the request, RFC 3339 with nanoseconds, UTC
//	op              "put", "merge" or "delete"
//	store, namespace, dataset
//	key_type        "string", "int64", "bytes" or "objectid"
//	key             the key: the string; the int64 in decimal (a string, so no JSON reader
//	                rounds it); bytes in standard base64; an ObjectID in 24 hex digits
//	if              absent (unconditional), "revision" or "absent"
//	revision        with if "revision": the revision's String form
//	program         merge only: the program source, whole
//	program_sha256  merge only: hex SHA-256 of the source; the decoder checks it, so a
//	                damaged program is refused rather than run
//	doc             put and merge: the document (a merge's incoming document), byte for
//	                byte but for whitespace around it
//	times           the document's date-time JSON Pointers, when it has any
//
// Every record carries its program, even when many operations of one request share it: a
// record is applied, retried and dead-lettered on its own, and a partition may be read from any
// offset, so a program table in a batch envelope could be out of reach of the record that needs
// it. Within one Enqueue, the Publisher hashes each distinct program once, and a Decoder
// verifies a run of records sharing a program once; the merger's compile cache (luamerge
// keys it by the same SHA-256) compiles it once.
//
// Decoders ignore members they do not know, so members may be added to version 1 only when
// ignoring them is safe; anything else needs a new version, which older workers refuse (and
// dead-letter): upgrade workers before the services that publish.
//
// What a decoder reads: one JSON object (RFC 8259, valid UTF-8 in its names and strings),
// members in any order with any whitespace; an unknown member, which must still be JSON, is
// skipped; a repeated member counts the last time; a null member is an absent one. v and index
// are integers without fraction or exponent (index 0 to 2^31). It is lenient, in ways that
// decode to the same record as Append's text of it, in exactly what the standard library
// reads: accepted_at is what time.Parse(time.RFC3339Nano) takes (any offset, a comma before the
// fraction, a one-digit hour), as long as the instant falls in the years 0000-9999 in UTC; an
// int64 key is what strconv.ParseInt takes ("+5", "007"); a bytes key is what
// base64.StdEncoding takes (line breaks skipped, non-zero padding bits ignored); an ObjectID
// key takes hex digits of either case. revision is read only with if "revision", and
// program_sha256 only with a program; other records ignore them. The document is delimited,
// not validated: store.Service.Apply validates it, so a record whose document is not JSON is refused
// there. FuzzDecode holds the decoder to a reference decoder over encoding/json that
// states these rules.
//
// The message key is MessageKey(address): every mutation of one record lands in one partition,
// in the order it was published.
type Record struct {
	// RequestID identifies the Do call that accepted the operation.
	RequestID string
	// Index is the operation's position in that call's ops.
	Index int
	// AcceptedAt is when the store accepted the request: merges see it as MergeContext.Time,
	// on every run and every redelivery.
	AcceptedAt time.Time
	// Op is the write: a put, merge or delete, with its precondition.
	Op store.Op
}

// Queued returns the operation as store.Service.Apply takes it.
func (r *Record) Queued() store.QueuedOp { return store.QueuedOp{Op: r.Op, AcceptedAt: r.AcceptedAt} }

// MessageKey returns the queue message key of every mutation of the record at addr: a
// deterministic, injective and readable encoding of the address,
//
//	<store>/<namespace>/<dataset>/<key kind>:<key>
//
// where '%' and '/' in the names are escaped as %25 and %2F, the key kinds are s (string, as
// it is), i (int64, decimal), b (bytes, hex) and o (ObjectID, hex).
func MessageKey(addr store.Address) []byte {
	return appendKey(make([]byte, 0, 64), addr)
}

func appendKey(dst []byte, addr store.Address) []byte {
	for _, name := range [...]string{addr.Store, addr.Namespace, addr.Dataset} {
		dst = appendEscapedName(dst, name)
		dst = append(dst, '/')
	}
	k := addr.Key
	switch k.Kind() {
	case store.KindStringKey:
		dst = append(dst, "s:"...)
		dst = append(dst, k.StringValue()...) // the last component: a '/' in it is unambiguous
	case store.KindInt64Key:
		dst = append(dst, "i:"...)
		dst = strconv.AppendInt(dst, k.Int64Value(), 10)
	case store.KindBytesKey:
		dst = append(dst, "b:"...)
		dst = hex.AppendEncode(dst, k.BytesValue())
	case store.KindObjectIDKey:
		dst = append(dst, "o:"...)
		id := k.ObjectIDValue()
		dst = hex.AppendEncode(dst, id[:])
	}
	return dst
}

func appendEscapedName(dst []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '%':
			dst = append(dst, "%25"...)
		case '/':
			dst = append(dst, "%2F"...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// ProgramHash returns the hex SHA-256 of a merge program, as records carry it.
func ProgramHash(program string) string {
	sum := sha256.Sum256([]byte(program))
	return hex.EncodeToString(sum[:])
}

// Append appends the version-1 encoding of r to dst. r.Op must be a valid put, merge or
// delete (the store.Service validates before it enqueues); programHash is ProgramHash(r.Op.Program)
// for a merge, passed in so that a batch sharing one program hashes it once.
func Append(dst []byte, r *Record, programHash string) []byte {
	var at [len(time.RFC3339Nano)]byte
	return appendRecord(dst, r, programHash, appendAcceptedAt(at[:0], r.AcceptedAt))
}

// appendAcceptedAt appends a record's accepted_at text.
func appendAcceptedAt(dst []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(dst, time.RFC3339Nano)
}

// appendRecord is Append with r.AcceptedAt already formatted by appendAcceptedAt, so
// the records of one request, which share it, format it once.
func appendRecord(dst []byte, r *Record, programHash string, acceptedAt []byte) []byte {
	op := &r.Op
	dst = append(dst, `{"v":1,"request":`...)
	dst = jsonenc.AppendString(dst, r.RequestID)
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(r.Index), 10)
	dst = append(dst, `,"accepted_at":"`...)
	dst = append(dst, acceptedAt...)
	dst = append(dst, `","op":"`...)
	dst = append(dst, op.Kind.String()...)
	dst = append(dst, `","store":`...)
	dst = jsonenc.AppendString(dst, op.Addr.Store)
	dst = append(dst, `,"namespace":`...)
	dst = jsonenc.AppendString(dst, op.Addr.Namespace)
	dst = append(dst, `,"dataset":`...)
	dst = jsonenc.AppendString(dst, op.Addr.Dataset)
	dst = append(dst, `,"key_type":"`...)
	dst = append(dst, op.Addr.Key.Kind().String()...)
	dst = append(dst, `","key":`...)
	switch k := op.Addr.Key; k.Kind() {
	case store.KindStringKey:
		dst = jsonenc.AppendString(dst, k.StringValue())
	case store.KindInt64Key:
		dst = append(dst, '"')
		dst = append(strconv.AppendInt(dst, k.Int64Value(), 10), '"')
	case store.KindBytesKey:
		dst = append(dst, '"')
		dst = append(base64.StdEncoding.AppendEncode(dst, k.BytesValue()), '"')
	case store.KindObjectIDKey:
		id := k.ObjectIDValue()
		dst = append(dst, '"')
		dst = append(hex.AppendEncode(dst, id[:]), '"')
	default:
		dst = append(dst, `""`...)
	}
	switch {
	case op.If.Absent():
		dst = append(dst, `,"if":"absent"`...)
	case !op.If.IsZero():
		dst = append(dst, `,"if":"revision","revision":"`...)
		dst = append(dst, op.If.Revision().String()...)
		dst = append(dst, '"')
	}
	if op.Kind == store.OpMerge {
		dst = append(dst, `,"program_sha256":"`...)
		dst = append(dst, programHash...)
		dst = append(dst, `","program":`...)
		dst = jsonenc.AppendString(dst, op.Program)
	}
	if op.Kind == store.OpPut || op.Kind == store.OpMerge {
		dst = append(dst, `,"doc":`...)
		dst = append(dst, bytes.Trim(op.Doc.JSON, " \t\r\n")...) // the decoder's copy has none
		if len(op.Doc.Times) > 0 {
			dst = append(dst, `,"times":[`...)
			for i, p := range op.Doc.Times {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = jsonenc.AppendString(dst, p)
			}
			dst = append(dst, ']')
		}
	}
	return append(dst, '}')
}

// validUTF8Program reports whether a merge program can travel in a record: the format carries
// it as a JSON string, which cannot hold arbitrary bytes.
func validUTF8Program(op *store.Op) bool {
	return op.Kind != store.OpMerge || utf8.ValidString(op.Program)
}

// String renders the record for logs: request, index and address, never the document.
func (r *Record) String() string {
	var b strings.Builder
	b.WriteString(r.Op.Kind.String())
	b.WriteByte(' ')
	b.WriteString(r.Op.Addr.String())
	b.WriteString(" (request ")
	b.WriteString(r.RequestID)
	b.WriteByte('#')
	b.WriteString(strconv.Itoa(r.Index))
	b.WriteByte(')')
	return b.String()
}
