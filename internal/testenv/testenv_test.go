package testenv

import (
	"strings"
	"testing"
)

func TestRequireReturnsValue(t *testing.T) {
	t.Setenv("TRIBUTARY_TESTENV_PROBE", "http://127.0.0.1:1")
	if got := Require(t, "TRIBUTARY_TESTENV_PROBE"); got != "http://127.0.0.1:1" {
		t.Fatalf("Require = %q, want the variable's value", got)
	}
}

func TestRequireSkipsWhenUnset(t *testing.T) {
	t.Setenv("TRIBUTARY_TESTENV_PROBE", "")
	var skipped bool
	t.Run("inner", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Require(t, "TRIBUTARY_TESTENV_PROBE")
		t.Error("Require returned for an unset variable")
	})
	if !skipped {
		t.Fatal("Require did not skip the test")
	}
}

func TestParseMySQLDSN(t *testing.T) {
	m, err := ParseMySQLDSN("app:p@ss:w@rd@tcp(127.0.0.1:33306)/test?parseTime=true")
	if err != nil || m != (MySQL{User: "app", Password: "p@ss:w@rd", Addr: "127.0.0.1:33306", DB: "test"}) {
		t.Fatalf("got %+v, %v", m, err)
	}
	for _, bad := range []string{"nouser", "u:p@127.0.0.1/db", "u:p@tcp(127.0.0.1:1)", "u:p@tcp(127.0.0.1:1)/", "u:secret@tcp()/db"} {
		_, err := ParseMySQLDSN(bad)
		if err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error quotes the DSN: %v", bad, err)
		}
	}
}
