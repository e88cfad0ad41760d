package searchstore

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/store/driver"
)

// ReservedIDPrefix starts the document _id of every key that is not a string key. A string key
// that starts with it would be indistinguishable from such an encoding, so ValidateAddress
// refuses it.
const ReservedIDPrefix = "~~"

// maxIDBytes is Elasticsearch's limit on _id; a longer one fails the whole _bulk request.
const maxIDBytes = 512

// documentID returns the _id of a key. String keys are used as they are, so documents written
// by other clients keep their ids; the other kinds get a reserved, deterministic form:
//
//	int64     ~~i:<decimal>            ~~i:-42
//	bytes     ~~b:<base64url, no pad>  ~~b:AP_-
//	objectid  ~~o:<24 lower-case hex>  ~~o:65a1f0c2e4b0a1b2c3d4e5f6
//
// The longest form (a 256-byte bytes key) is 346 bytes, inside the 512-byte _id limit.
func documentID(k driver.Key) string {
	switch k.Kind() {
	case driver.Int64Key:
		return ReservedIDPrefix + "i:" + strconv.FormatInt(k.Int64Value(), 10)
	case driver.BytesKey:
		return ReservedIDPrefix + "b:" + base64.RawURLEncoding.EncodeToString(k.BytesValue())
	case driver.ObjectIDKey:
		id := k.ObjectIDValue()
		return ReservedIDPrefix + "o:" + hex.EncodeToString(id[:])
	}
	return k.StringValue()
}

// ValidateAddress implements driver.AddressValidator: it refuses, as KindInvalid, a string key
// that collides with the reserved encoding of other key kinds, a key whose _id would exceed
// 512 bytes, and a dataset name Elasticsearch and OpenSearch would reject as an index or alias
// name. The namespace and store name are not part of the storage identity and pass as they are.
func (s *Store) ValidateAddress(a driver.Address) error {
	if err := validateIndexName(a.Dataset); err != nil {
		return driver.NewError(driver.KindInvalid, "searchstore: dataset "+strconv.Quote(a.Dataset)+": "+err.Error(), nil)
	}
	if a.Key.Kind() == driver.StringKey && strings.HasPrefix(a.Key.StringValue(), ReservedIDPrefix) {
		return driver.NewError(driver.KindInvalid, "searchstore: string key "+a.Key.String()+" starts with the reserved prefix "+strconv.Quote(ReservedIDPrefix), nil)
	}
	if n := len(documentID(a.Key)); n > maxIDBytes {
		return driver.NewError(driver.KindInvalid, fmt.Sprintf("searchstore: key %v gives a %d-byte _id, more than %d", a.Key, n, maxIDBytes), nil)
	}
	return nil
}

// validateIndexName applies the index-name rules both engines share (aliases follow the same
// rules): lower case, no characters from the forbidden set, not starting with '-', '_' or '+',
// not "." or "..", at most 255 bytes. Wildcards and commas would widen a request to several
// indices; they are refused for the same reason.
func validateIndexName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty")
	case len(name) > 255:
		return fmt.Errorf("%d bytes, more than 255", len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("not valid UTF-8")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not an index name", name)
	case strings.ContainsAny(name[:1], "-_+"):
		return fmt.Errorf("starts with %q", name[:1])
	case strings.ToLower(name) != name:
		return fmt.Errorf("not lower case")
	}
	if i := strings.IndexAny(name, "\\/*?\"<>| ,#:"); i >= 0 {
		return fmt.Errorf("contains %q", name[i:i+1])
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("contains a control character")
		}
	}
	return nil
}

// pathEscape escapes a name for a URL path segment.
func pathEscape(name string) string { return url.PathEscape(name) }
