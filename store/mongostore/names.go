package mongostore

import (
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/store/driver"
)

// MongoDB's limits on names (the stricter, cross-platform set, so that an address valid here is
// valid on every deployment).
const (
	maxDatabaseBytes  = 63  // a database name is shorter than 64 bytes
	maxNamespaceBytes = 255 // database + "." + collection
)

// systemDatabases hold the server's own state; records do not belong there.
var systemDatabases = map[string]bool{"admin": true, "local": true, "config": true}

// ValidateAddress implements driver.AddressValidator: it refuses namespaces and datasets that
// MongoDB cannot use as database and collection names, and the system databases.
func (s *Store) ValidateAddress(a driver.Address) error {
	if err := validateNames(a.Namespace, a.Dataset); err != nil {
		return driver.NewError(driver.KindInvalid, "mongostore: "+err.Error(), nil)
	}
	return nil
}

type nameError string

func (e nameError) Error() string { return string(e) }

func validateNames(db, coll string) error {
	switch {
	case db == "":
		return nameError("the namespace (database name) is empty")
	case len(db) > maxDatabaseBytes:
		return nameError("the namespace " + strconv.Quote(db) + " is longer than MongoDB's " + strconv.Itoa(maxDatabaseBytes) + "-byte limit on database names")
	case strings.ContainsAny(db, "/\\. \"$*<>:|?\x00"):
		return nameError("the namespace " + strconv.Quote(db) + ` contains a character MongoDB refuses in database names (/\. "$*<>:|? or NUL)`)
	case systemDatabases[strings.ToLower(db)]:
		return nameError("the namespace " + strconv.Quote(db) + " is a MongoDB system database")
	case coll == "":
		return nameError("the dataset (collection name) is empty")
	case strings.ContainsAny(coll, "$\x00"):
		return nameError("the dataset " + strconv.Quote(coll) + " contains '$' or NUL, which MongoDB refuses in collection names")
	case coll[0] == '.':
		return nameError("the dataset " + strconv.Quote(coll) + " starts with '.'")
	case strings.HasPrefix(coll, "system."):
		return nameError("the dataset " + strconv.Quote(coll) + " is in MongoDB's reserved system. prefix")
	case len(db)+1+len(coll) > maxNamespaceBytes:
		return nameError("namespace and dataset together exceed MongoDB's " + strconv.Itoa(maxNamespaceBytes) + "-byte namespace limit")
	}
	return nil
}
