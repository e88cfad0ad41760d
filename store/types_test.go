package store

import (
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/store/driver"
)

// TestTypesAreStoresOwn: the record vocabulary applications touch is defined in package store
// (go doc shows the types, their fields and methods), not aliases of the adapter contract's.
func TestTypesAreStoresOwn(t *testing.T) {
	const pkg = "github.com/tributary-dev/tributary/store"
	for _, v := range []any{Key{}, KeyKind(0), Address{}, Document{}, Outcome(0), ErrorKind(0)} {
		if p := reflect.TypeOf(v).PkgPath(); p != pkg {
			t.Errorf("%T is defined in %s, want %s", v, p, pkg)
		}
	}
}

// TestVocabularyAgreesWithDriver: the Service converts between store's and driver's copies of
// the vocabulary by value, so every constant must mean the same number in both.
func TestVocabularyAgreesWithDriver(t *testing.T) {
	outcomes := map[Outcome]driver.Outcome{Found: driver.Found, Absent: driver.Absent, Created: driver.Created,
		Updated: driver.Updated, Deleted: driver.Deleted, Unchanged: driver.Unchanged, Accepted: driver.Accepted}
	for o, d := range outcomes {
		if uint8(o) != uint8(d) || o.String() != d.String() {
			t.Errorf("outcome %v (%d) is driver's %v (%d)", o, o, d, d)
		}
	}
	kinds := map[ErrorKind]driver.ErrorKind{KindInternal: driver.KindInternal, KindDatasetNotFound: driver.KindNotFound,
		KindAlreadyExists: driver.KindAlreadyExists, KindConflict: driver.KindConflict, KindInvalid: driver.KindInvalid,
		KindTooLarge: driver.KindTooLarge, KindUnavailable: driver.KindUnavailable, KindCanceled: driver.KindCanceled,
		KindOutcomeUnknown: driver.KindOutcomeUnknown, KindPermissionDenied: driver.KindPermissionDenied,
		KindNoQueue: driver.KindNoQueue}
	for k, d := range kinds {
		if uint8(k) != uint8(d) || k.String() != d.String() || k.Retryable() != d.Retryable() {
			t.Errorf("kind %v (%d) is driver's %v (%d)", k, k, d, d)
		}
	}
	if s := ErrorKind(len(kinds)).String(); s != driver.ErrorKind(len(kinds)).String() || driver.ErrorKind(len(kinds)).String() == driver.KindNoQueue.String() {
		t.Errorf("driver has more error kinds than store names: %q", s)
	}
	keyKinds := map[KeyKind]driver.KeyKind{KindStringKey: driver.StringKey, KindInt64Key: driver.Int64Key,
		KindBytesKey: driver.BytesKey, KindObjectIDKey: driver.ObjectIDKey}
	for k, d := range keyKinds {
		if uint8(k) != uint8(d) || k.String() != d.String() {
			t.Errorf("key kind %v (%d) is driver's %v (%d)", k, k, d, d)
		}
	}
	if MaxNameBytes != driver.MaxNameBytes || MaxStringKeyBytes != driver.MaxStringKeyBytes || MaxBytesKeyBytes != driver.MaxBytesKeyBytes {
		t.Error("store's name and key limits differ from driver's")
	}
	if NotFound != Absent || KindNotFound != KindDatasetNotFound || ErrNotFound != ErrDatasetNotFound {
		t.Error("a deprecated name no longer means its replacement")
	}
}

// TestAddressConversion: an address reaches the adapter as it was built, for every key type,
// without an allocation.
func TestAddressConversion(t *testing.T) {
	keys := map[Key]driver.Key{
		StringKey("ada"):               driver.NewStringKey("ada"),
		Int64Key(-7):                   driver.NewInt64Key(-7),
		BytesKey([]byte{0, 1}):         driver.NewBytesKey([]byte{0, 1}),
		ObjectIDKey([12]byte{1, 2, 3}): driver.NewObjectIDKey([12]byte{1, 2, 3}),
		{}:                             {},
	}
	for k, d := range keys {
		a := Address{Store: "s", Namespace: "n", Dataset: "d", Key: k}
		want := driver.Address{Store: "s", Namespace: "n", Dataset: "d", Key: d}
		if got := a.driver(); got != want {
			t.Errorf("%v reaches the adapter as %v", a, got)
		}
		if a.String() != want.String() || (a.Validate() == nil) != (want.Validate() == nil) || k.Kind() != KeyKind(d.Kind()) {
			t.Errorf("%v: text, validity or kind differ from driver's", a)
		}
	}
	a := Address{Store: "s", Namespace: "n", Dataset: "d", Key: StringKey("ada")}
	var sink driver.Address
	if n := testing.AllocsPerRun(100, func() { sink = a.driver() }); n != 0 {
		t.Errorf("converting an address allocates %v times", n)
	}
	_ = sink
}
