package memstore

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/internal/jsonenc"
	"github.com/tributary-dev/tributary/store/driver"
)

// The refusals below copy the adapters' (mongostore's names.go and encode.go, mongostore's
// FerretDB options, searchstore's keys.go); storetest's Refusals behaviour runs the same cases
// against the fake in every profile and against each adapter on its real server, so the copies
// cannot drift unseen. Messages name the field by its JSON Pointer, never its value.

// ValidateAddress implements driver.AddressValidator: the names and keys the backends of the
// Store's profile refuse, refused before anything is written.
func (s *Store) ValidateAddress(a driver.Address) error {
	p := &s.prof
	if p.keyKinds != nil && !p.keyKinds[a.Key.Kind()] {
		return refusal(driver.KindInvalid, "key kind "+a.Key.Kind().String()+" is not one this store accepts")
	}
	if p.mongo {
		if msg := mongoNames(a.Namespace, a.Dataset); msg != "" {
			return refusal(driver.KindInvalid, msg+" (as MongoDB)")
		}
	}
	if p.search {
		if msg := indexName(a.Dataset); msg != "" {
			return refusal(driver.KindInvalid, "dataset "+strconv.Quote(a.Dataset)+": "+msg+" (as an Elasticsearch or OpenSearch index name)")
		}
		if a.Key.Kind() == driver.StringKey && strings.HasPrefix(a.Key.StringValue(), "~~") {
			return refusal(driver.KindInvalid, `string key starts with "~~", reserved for the other key kinds (as searchstore)`)
		}
	}
	return nil
}

// TimePrecision implements driver.TimePrecisioner: the profile's date-time precision (0: any).
func (s *Store) TimePrecision() time.Duration { return s.prof.timePrec }

func refusal(k driver.ErrorKind, msg string) error {
	return driver.NewError(k, "memstore: "+msg, nil)
}

func mongoNames(db, coll string) string {
	switch {
	case len(db) > 63:
		return "the namespace is longer than MongoDB's 63-byte limit on database names"
	case strings.ContainsAny(db, "/\\. \"$*<>:|?\x00"):
		return "the namespace " + strconv.Quote(db) + ` contains a character MongoDB refuses in database names (/\. "$*<>:|? or NUL)`
	case db == "admin" || db == "local" || db == "config" || strings.EqualFold(db, "admin") || strings.EqualFold(db, "local") || strings.EqualFold(db, "config"):
		return "the namespace " + strconv.Quote(db) + " is a MongoDB system database"
	case strings.ContainsAny(coll, "$\x00"):
		return "the dataset " + strconv.Quote(coll) + " contains '$' or NUL"
	case coll != "" && coll[0] == '.':
		return "the dataset " + strconv.Quote(coll) + " starts with '.'"
	case strings.HasPrefix(coll, "system."):
		return "the dataset " + strconv.Quote(coll) + " is in the reserved system. prefix"
	case len(db)+1+len(coll) > 255:
		return "namespace and dataset together exceed MongoDB's 255-byte namespace limit"
	}
	return ""
}

func indexName(name string) string {
	switch {
	case name == "." || name == "..":
		return "not an index name"
	case name != "" && strings.ContainsAny(name[:1], "-_+"):
		return "starts with " + strconv.Quote(name[:1])
	case strings.ToLower(name) != name:
		return "not lower case"
	}
	if i := strings.IndexAny(name, "\\/*?\"<>| ,#:"); i >= 0 {
		return "contains " + strconv.Quote(name[i:i+1])
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "contains a control character"
		}
	}
	return ""
}

// metadataField is mongostore's default metadata field, reserved at the top level.
const metadataField = "_tributary"

// checker walks one document (valid JSON, an object: the Service checked) for the profile's
// refusals, keeping the JSON Pointer of the value it is at.
type checker struct {
	p     *profile
	src   []byte
	pos   int
	path  []byte
	times map[string]bool
	depth int
}

// check returns the profile's refusal of doc, or nil. The Service hands adapters valid JSON
// objects only; on anything else check returns without a panic or a loop (FuzzCheck).
func (p *profile) check(doc driver.Document) error {
	if p.maxDoc > 0 && len(doc.JSON) > p.maxDoc {
		return refusal(driver.KindTooLarge, "the document is "+strconv.Itoa(len(doc.JSON))+" bytes of JSON, more than the limit of "+strconv.Itoa(p.maxDoc))
	}
	if !p.mongo && !p.search && p.timePrec <= 0 {
		return nil
	}
	c := checker{p: p, src: doc.JSON}
	if len(doc.Times) > 0 {
		c.times = make(map[string]bool, len(doc.Times))
		for _, t := range doc.Times {
			c.times[t] = true
		}
	}
	c.space()
	if c.pos >= len(c.src) || c.src[c.pos] != '{' {
		return nil // the Service refuses it
	}
	if err := c.value(0); err != errMalformed {
		return err
	}
	return nil // the Service refuses it
}

// errMalformed ends a check on a string the Service refuses; check returns nil for it.
var errMalformed = errors.New("memstore: malformed JSON string")

func (c *checker) fail(k driver.ErrorKind, msg string) error {
	at := string(c.path)
	if at == "" {
		return refusal(k, msg)
	}
	return refusal(k, "at "+strconv.Quote(at)+": "+msg)
}

func (c *checker) space() {
	for c.pos < len(c.src) && (c.src[c.pos] == ' ' || c.src[c.pos] == '\t' || c.src[c.pos] == '\n' || c.src[c.pos] == '\r') {
		c.pos++
	}
}

// value checks the value at c.pos; parent is the kind of its container ('{', '[', or 0).
func (c *checker) value(parent byte) error {
	c.space()
	if c.pos >= len(c.src) {
		return nil
	}
	marked := c.times != nil && c.times[string(c.path)]
	switch ch := c.src[c.pos]; {
	case ch == '{' || ch == '[':
		c.depth++
		if c.p.mongo && c.depth > 100 {
			return c.fail(driver.KindInvalid, "objects and arrays nest more than 100 levels deep (as MongoDB)")
		}
		if ch == '[' && parent == '[' && c.p.ferret {
			return c.fail(driver.KindInvalid, "an array directly inside an array (as FerretDB 1.x)")
		}
		c.pos++
		var err error
		if ch == '{' {
			err = c.members()
		} else {
			err = c.elements()
		}
		c.depth--
		return err
	case ch == '"':
		s, err := c.str()
		if err != nil {
			return err
		}
		if marked && c.p.timePrec > 0 {
			if t, perr := time.Parse(time.RFC3339Nano, s); perr == nil && t.Nanosecond()%int(c.p.timePrec) != 0 {
				return c.fail(driver.KindInvalid, "the date-time is finer than the store's precision of "+c.p.timePrec.String())
			}
		}
		return nil
	case ch == '-' || (ch >= '0' && ch <= '9'):
		start := c.pos
		for c.pos < len(c.src) && strings.IndexByte("+-0123456789.eE", c.src[c.pos]) >= 0 {
			c.pos++
		}
		return c.number(string(c.src[start:c.pos]))
	default: // true, false, null
		for c.pos < len(c.src) && c.src[c.pos] >= 'a' && c.src[c.pos] <= 'z' {
			c.pos++
		}
		return nil
	}
}

func (c *checker) members() error {
	top := c.depth == 1
	seen := map[string]bool{}
	dollarOnly := true
	n := 0
	for {
		c.space()
		if c.pos >= len(c.src) || c.src[c.pos] != '"' { // '}', or JSON the Service would refuse
			c.pos++
			break
		}
		name, err := c.str()
		if err != nil {
			return err
		}
		mark := len(c.path)
		c.path = append(c.path, '/')
		c.path = jsonenc.AppendPointerToken(c.path, name)
		n++
		if !strings.HasPrefix(name, "$") {
			dollarOnly = false
		}
		switch {
		case seen[name] && (c.p.mongo || c.p.search):
			return c.fail(driver.KindInvalid, "the member name is repeated in its object")
		case top && name == "_id" && (c.p.mongo || c.p.search):
			return c.fail(driver.KindInvalid, "a top-level _id member (the record key is the _id)")
		case top && name == metadataField && c.p.mongo:
			return c.fail(driver.KindInvalid, "a top-level member named like mongostore's metadata field")
		case top && strings.HasPrefix(name, "$") && c.p.mongo:
			return c.fail(driver.KindInvalid, "a top-level member name starts with '$' (as MongoDB)")
		case strings.IndexByte(name, 0) >= 0 && c.p.mongo:
			return c.fail(driver.KindInvalid, "a member name holds U+0000 (as BSON)")
		case c.p.ferret && (strings.HasPrefix(name, "$") || strings.Contains(name, ".")):
			return c.fail(driver.KindInvalid, "a member name starts with '$' or holds '.' (as FerretDB 1.x)")
		}
		seen[name] = true
		c.space()
		c.pos++ // ':'
		start := c.pos
		if err := c.value('{'); err != nil {
			return err
		}
		if c.pos == start { // JSON the Service would refuse: no value here
			return nil
		}
		c.path = c.path[:mark]
		c.space()
		if c.pos < len(c.src) && c.src[c.pos] == ',' {
			c.pos++
		}
	}
	if n > 0 && dollarOnly && c.p.mongo && !extendedJSON[firstName(seen)] {
		return c.fail(driver.KindInvalid, "an object whose member names all start with '$' and that is no Extended JSON value (as mongostore)")
	}
	return nil
}

// extendedJSON are the wrappers mongostore turns back into BSON types (its other dollar-only
// objects are refused; a malformed wrapper is refused there and not here).
var extendedJSON = map[string]bool{"$oid": true, "$binary": true, "$timestamp": true, "$regularExpression": true,
	"$minKey": true, "$maxKey": true, "$numberDouble": true, "$numberDecimal": true}

func firstName(m map[string]bool) string {
	for k := range m {
		if extendedJSON[k] {
			return k
		}
	}
	return ""
}

func (c *checker) elements() error {
	for i := 0; ; i++ {
		c.space()
		if c.pos >= len(c.src) || c.src[c.pos] == ']' {
			c.pos++
			return nil
		}
		mark := len(c.path)
		c.path = append(c.path, '/')
		c.path = strconv.AppendInt(c.path, int64(i), 10)
		start := c.pos
		if err := c.value('['); err != nil {
			return err
		}
		if c.pos == start { // JSON the Service would refuse: no value here
			return nil
		}
		c.path = c.path[:mark]
		c.space()
		if c.pos < len(c.src) && c.src[c.pos] == ',' {
			c.pos++
		}
	}
}

// str reads the string at c.pos (its opening quote) and returns it decoded (jsonenc.Unquote),
// refusing a lone UTF-16 surrogate when MongoDB's refusals apply (BSON strings are UTF-8;
// otherwise it reads as U+FFFD). A malformed string ends the check at once, without a refusal:
// the Service refuses it.
func (c *checker) str() (string, error) {
	b, n, lone, err := jsonenc.Unquote(nil, c.src[c.pos+1:])
	if err != nil {
		c.pos = len(c.src)
		return "", errMalformed
	}
	c.pos += 1 + n
	if lone && c.p.mongo {
		return "", c.fail(driver.KindInvalid, "a string holds a lone UTF-16 surrogate (as BSON)")
	}
	return string(b), nil
}

// number refuses what mongostore cannot store exactly: a number needing more than 34
// significant digits or an exponent beyond Decimal128's; with FerretDB's refusals also a
// number that needs a Decimal128 at all, and -0.
func (c *checker) number(lit string) error {
	if !c.p.mongo {
		return nil
	}
	neg, digits, exp := decimalParts(lit)
	if c.p.ferret && neg && digits == "" {
		return c.fail(driver.KindInvalid, "a number is -0, which FerretDB 1.x stores as 0 (as FerretDB 1.x)")
	}
	integer := !strings.ContainsAny(lit, ".eE")
	if integer {
		if _, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return nil
		}
	} else if f, err := strconv.ParseFloat(lit, 64); err == nil {
		n2, d2, e2 := decimalParts(strconv.FormatFloat(f, 'e', -1, 64))
		if n2 == neg && d2 == digits && e2 == exp {
			return nil // a double holds it exactly
		}
	}
	if len(digits) > 34 || exp < -6176 || exp+len(digits) > 6111+34 {
		return c.fail(driver.KindInvalid, "a number has more than 34 significant digits or an exponent out of range: no BSON type holds it exactly")
	}
	if c.p.ferret {
		return c.fail(driver.KindInvalid, "a number needs Decimal128 to be stored exactly (as FerretDB 1.x, which has none)")
	}
	return nil
}

// decimalParts returns a JSON number's sign, its significant digits (no leading or trailing
// zeros; "" for zero) and the exponent of the last of them.
func decimalParts(lit string) (neg bool, digits string, exp int) {
	if strings.HasPrefix(lit, "-") {
		neg, lit = true, lit[1:]
	}
	mant := lit
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant = lit[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil {
			e = 1 << 30
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp -= len(frac)
	all := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(all, "0")
	exp += len(all) - len(trimmed)
	return neg, trimmed, exp
}
