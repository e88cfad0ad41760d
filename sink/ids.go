package sink

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/cdc"
)

// maxIDBytes is Elasticsearch's limit on _id.
const maxIDBytes = 512

// errNoKey is the per-row failure for a table with neither a primary key nor id_fields.
var errNoKey = errors.New("serialization failure: the table has no primary key and id_fields is not set; the sink never generates an _id")

// idColumns resolves the columns the _id is built from: id_fields when set, else the primary
// key. A missing column or an empty key is a per-row failure (returned for every row of the
// table), never a fallback to an auto-generated id.
func idColumns(s *cdc.TableSchema, fields []string) ([]int, error) {
	if len(fields) > 0 {
		cols := make([]int, len(fields))
		for i, f := range fields {
			c := s.ColumnIndex(f)
			if c < 0 {
				return nil, fmt.Errorf("serialization failure: id_fields names %q, which is not a column of the table", f)
			}
			cols[i] = c
		}
		return cols, nil
	}
	if len(s.PrimaryKey) == 0 {
		return nil, errNoKey
	}
	return s.PrimaryKey, nil
}

// appendID appends the _id of row to dst. One column gives its text as is. Several are joined
// by sep, each escaped first: a backslash becomes \\ and every byte that occurs in sep is
// preceded by a backslash. So an unescaped separator byte only ever belongs to a real
// separator, and ("a|b","c") and ("a","b|c") give "a\|b|c" and "a|b\|c". (Validation forbids a
// backslash in sep.) The number of columns is fixed per table, so a single column needs no
// escaping to stay unambiguous.
func appendID(dst []byte, s *cdc.TableSchema, cols []int, row []cdc.Value, sep string) ([]byte, error) {
	start := len(dst)
	for i, c := range cols {
		if c >= len(row) {
			return dst[:start], errors.New("serialization failure: the row has fewer values than the schema has columns")
		}
		if i > 0 {
			dst = append(dst, sep...)
		}
		var err error
		if len(cols) == 1 {
			dst, err = appendKeyText(dst, s.Columns[c], row[c])
		} else {
			mark := len(dst)
			dst, err = appendKeyText(dst, s.Columns[c], row[c])
			if err == nil {
				dst = escapeFrom(dst, mark, sep)
			}
		}
		if err != nil {
			return dst[:start], err
		}
	}
	if len(dst)-start == 0 {
		return dst[:start], errors.New("serialization failure: the _id would be empty")
	}
	if len(dst)-start > maxIDBytes {
		return dst[:start], fmt.Errorf("serialization failure: the _id is longer than %d bytes", maxIDBytes)
	}
	return dst, nil
}

// escapeFrom escapes dst[mark:] in place (by rebuilding the tail).
func escapeFrom(dst []byte, mark int, sep string) []byte {
	need := false
	for _, c := range dst[mark:] {
		if c == '\\' || strings.IndexByte(sep, c) >= 0 {
			need = true
			break
		}
	}
	if !need {
		return dst
	}
	tail := append([]byte(nil), dst[mark:]...)
	dst = dst[:mark]
	for _, c := range tail {
		if c == '\\' || strings.IndexByte(sep, c) >= 0 {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return dst
}

// appendKeyText renders one key value as text the same way from the snapshot and from the
// stream. Errors name the column, never the value.
func appendKeyText(dst []byte, col cdc.Column, v cdc.Value) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return dst, fmt.Errorf("serialization failure: id column %q is NULL", col.Name)
	case string:
		return append(dst, x...), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return dst, fmt.Errorf("serialization failure: id column %q is not a finite number", col.Name)
		}
		return strconv.AppendFloat(dst, x, 'g', -1, 64), nil
	case cdc.EpochMicros:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case cdc.Base64:
		if col.Kind == cdc.KindText {
			// The MySQL binlog wraps TEXT in base64; the snapshot sends the text. Decode
			// so both paths give the same _id.
			b, err := base64.StdEncoding.DecodeString(string(x))
			if err != nil {
				return dst, fmt.Errorf("serialization failure: id column %q holds malformed base64", col.Name)
			}
			return append(dst, b...), nil
		}
		return append(dst, x...), nil
	default:
		return dst, fmt.Errorf("serialization failure: id column %q has a type (%s) that cannot form an _id", col.Name, col.Kind)
	}
}
