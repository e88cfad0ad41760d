package cdc

import "encoding/json"

// eventOverhead approximates what an event costs beyond its values: the bulk action line,
// the document's metadata and the runner's bookkeeping.
const eventOverhead = 128

// eventBytes estimates an event's size for batching: roughly its values' JSON size with
// their column names, before and after images both (both are held in memory).
func eventBytes(ev *Event) int {
	n := eventOverhead + len(ev.Table.Database) + len(ev.Table.Schema) + len(ev.Table.Table)
	for _, row := range [][]Value{ev.Before, ev.After} {
		for i, v := range row {
			n += valueBytes(v) + 4 // quotes, colon, comma
			if ev.Schema != nil && i < len(ev.Schema.Columns) {
				n += len(ev.Schema.Columns[i].Name)
			}
		}
	}
	return n
}

func valueBytes(v Value) int {
	switch v := v.(type) {
	case nil:
		return 4
	case bool:
		return 5
	case int64, uint64, float64, EpochMicros:
		return 12 // digits of a typical number; exactness does not matter here
	case string:
		return len(v) + 2
	case Base64:
		return len(v) + len(`{"_base64":""}`)
	case json.RawMessage:
		return len(v)
	case []byte:
		return len(v)*4/3 + 4
	case []Value:
		n := 2
		for _, e := range v {
			n += valueBytes(e) + 1
		}
		return n
	default:
		return 16
	}
}
